"""The history window of a prompt: a session's messages within the token budget.

Most requests fit in the rows read with the user's message (db/conversation.py's
HISTORY_ROWS); a session that outgrows them goes to the Compressor (bot/sessions/compress.py),
which summarises its oldest range (verified) rather than dropping it. A stored message
never changes, so its token cost is counted once per process.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from bot.agent.prompt import message_cost, to_openai
from bot.config import Settings
from bot.llm.model import ChatModel
from bot.sessions import compress
from bot.sessions.compress import Compressor, Fitted, history_budget
from db.conversation import HISTORY_ROWS
from db.engine import SessionFactory
from db.repos.core import HistoryRow
from tools.base import Clock, RequestContext

log = logging.getLogger(__name__)

COST_CACHE_MAX = 200_000  # token counts of stored messages kept per process


@dataclass(frozen=True)
class Prefetched:
    """History rows of a session as wire messages with their token costs."""

    session_id: int
    wire: list[dict[str, Any]]
    costs: list[int]
    rows: int  # how many rows were read


async def context_of(llm: ChatModel) -> int | None:
    """The model's context in tokens where the client knows it (LLM_CONTEXT_TOKENS, or what
    llama.cpp / Ollama say, asked once per model), else None."""
    try:
        return await llm.context_tokens()
    except Exception:  # a probe that fails leaves the configured budget, not the message
        log.warning("could not read the model's context size", exc_info=True)
        return None


@dataclass
class HistoryWindow:
    session_factory: SessionFactory
    clock: Clock
    _costs: dict[int, int] = field(default_factory=dict, repr=False)

    def wire(self, session_id: int, rows: Sequence[HistoryRow]) -> Prefetched:
        """History rows as wire messages with their token costs."""
        if len(self._costs) > COST_CACHE_MAX:
            self._costs.clear()
        wire = [to_openai(m) for m in rows]
        costs = []
        for m, w in zip(rows, wire, strict=True):
            cost = self._costs.get(m.id)
            if cost is None:
                cost = message_cost(w)
                # The newest user turn gets its context block kept once it is sent: count it
                # again then.
                if m.role != "user" or m.context is not None:
                    self._costs[m.id] = cost
            costs.append(cost)
        return Prefetched(session_id, wire, costs, len(rows))

    async def fit(
        self,
        ctx: RequestContext,
        settings: Settings,
        llm: ChatModel,
        prefetched: Prefetched | None = None,
    ) -> Fitted:
        """The session's history within the budget (HISTORY_TOKEN_BUDGET, lowered to what the
        model's context leaves), oldest first, with the note on what an earlier summary
        covers or what is not shown in front of the first turn. `llm` writes the summaries."""
        budget = history_budget(settings, await context_of(llm))
        got = prefetched
        # The whole session was read with the message and fits: nothing was compressed away.
        if got is not None and got.session_id == ctx.session_id and got.rows < HISTORY_ROWS:
            if sum(got.costs) <= budget:
                return Fitted(got.wire)
        compressor = Compressor(self.session_factory, llm, self.clock, compress.SUMMARY_REVIEW)
        return await compressor.fit(ctx.session_id, ctx.user_id, budget)
