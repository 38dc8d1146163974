"""What a request's tool calls taught discovery: written in with the tool round's record."""

from __future__ import annotations

from dataclasses import dataclass

from db.conversation import RecordWrite
from tools.base import RequestContext
from tools.discovery.repo import ADD_USE, USED
from tools.hooks import TurnHooks
from tools.registry import Discovery


@dataclass
class Learning(TurnHooks):
    """The discovery feature's part of a request whose tools ran: what its calls used goes
    in with the tool round's record."""

    when = (USED,)
    disc: Discovery

    def record_writes(self, ctx: RequestContext) -> list[RecordWrite]:
        used = ctx.state(USED)
        if not used:
            return []
        rows = self.disc.learned(ctx.user_id, used)
        used.clear()
        return [RecordWrite(ADD_USE, rows)]
