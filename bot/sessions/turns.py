"""The sessions' part of every agent request (bot/agent/hooks.py): the period check that
begins each turn (SESSION_SPLIT), and the close the model asked for after its answer.

Apart from lifecycle.py so that the feature's declaration (feature.py, read while the
settings are assembled) does not import the agent's hooks, which import the settings.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from bot.agent.hooks import Followup, TurnHooks
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
