"""The sessions' part of every agent request (bot/agent/hooks.py): the period check that
begins each turn (SESSION_SPLIT), the user turn's context block kept with it as it is
first sent (so later requests send the turn unchanged: each request extends the previous
one byte for byte, and a provider's prefix cache re-reads only what is new), and the
close the model asked for after its answer.

Apart from lifecycle.py so that the feature's declaration (feature.py, read while the
settings are assembled) does not import the agent's hooks, which import the settings.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from bot.agent.hooks import Followup, ModelRequest, TurnHooks
from bot.agent.prompt import sent_context
from bot.sessions import repo
from bot.sessions.archive import Archiver
from bot.sessions.lifecycle import close_on_request, period_check
from bot.sessions.policy import SessionPolicy
from db.conversation import PeriodOver
from db.engine import SessionFactory
from tools.base import Clock, RequestContext
from tools.model_call import Purpose


@dataclass
class SessionTurns(TurnHooks):
    """The sessions' part of every request (bot/agent/hooks.py): a TurnPolicy (the period
    check) and a RequestHooks whose turn hooks close the session when the model asked for a
    fresh start. It holds nothing per request, so each request gets this same object."""

    policy: SessionPolicy
    session_factory: SessionFactory
    clock: Clock
    archiver: Archiver | None  # None: memory is off; the scheduler archives it later

    def period_over(self, now: datetime) -> PeriodOver:
        return period_check(self.policy, now)

    def begin(self, ctx: RequestContext, user: object, purpose: Purpose) -> SessionTurns:
        return self

    async def on_model_request(self, req: ModelRequest) -> None:
        message_id = req.ctx.trigger_message_id
        if req.turn != 0 or message_id is None:
            return
        block = sent_context(req.parts.history)
        if block is None:
            return
        async with self.session_factory() as s, s.begin():
            await repo.keep_context(s, message_id, block)

    async def after_answer(self, ctx: RequestContext) -> Followup | None:
        if not ctx.new_session_requested:
            return None
        return await close_on_request(
            self.session_factory,
            self.clock,
            self.archiver,
            telegram_user_id=ctx.telegram_user_id,
            user_name=ctx.user_name,
        )
