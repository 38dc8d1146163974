"""A turn in flight for a chat the owner has just removed (its person, or its group) stops
before its next model call: the approval question it waited on closed, and nothing more is
spent or said for them but the one line that it stopped.

The removal marks the chat's requests (tools/hooks.py Marks): until one holds REMOVED, the
loop does not ask this hook at all, so a message from a chat nobody removed never enters it."""

from __future__ import annotations

from typing import Any, ClassVar

from bot.access.gate import AccessList
from tools.admission import OnRemoval
from tools.hooks import HookRefusal, Marks, ModelRequest, TurnHooks
from tools.state import Slot

STOPPED = "The owner removed this chat's access, so I stopped here."

# Held by the requests of a chat the owner removed in this process (in flight or begun since).
REMOVED: Slot[bool] = Slot("access.removed", bool)


def marking(marks: Marks) -> OnRemoval:
    """The reaction to a removal that marks the chat's requests."""

    async def removed(chat_id: int) -> None:
        marks.mark(chat_id, REMOVED)

    return removed


class StopRemoved(TurnHooks):
    when: ClassVar[tuple[Slot[Any], ...]] = (REMOVED,)

    def __init__(self, access: AccessList) -> None:
        self.access = access

    async def on_model_request(self, req: ModelRequest) -> None:
        # Let in again since: the turn goes on.
        chat = req.ctx.chat_id
        if chat is not None and not await self.access.serves(chat):
            raise HookRefusal(STOPPED)
