"""The history window of a prompt: a session's newest messages within the token budget.

Most requests fit in the rows read with the user's message (db/conversation.py's
HISTORY_ROWS); more are read only when those all fit. A stored message never changes, so
its token cost is counted once per process.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from bot.agent.prompt import message_cost, to_openai, trim_history
from db.conversation import HISTORY_ROWS, Conversation
from db.repos.core import HistoryRow

COST_CACHE_MAX = 200_000  # token counts of stored messages kept per process
MORE_ROWS = 1000  # rows read when the first HISTORY_ROWS all fit the budget


@dataclass(frozen=True)
class Prefetched:
    """History rows of a session as wire messages with their token costs."""

    session_id: int
    wire: list[dict[str, Any]]
    costs: list[int]
    rows: int  # how many rows were read


@dataclass
class HistoryWindow:
    conversation: Conversation
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
                cost = self._costs[m.id] = message_cost(w)
            costs.append(cost)
        return Prefetched(session_id, wire, costs, len(rows))

    async def fit(
        self, session_id: int, budget: int, prefetched: Prefetched | None = None
    ) -> list[dict[str, Any]]:
        """The session's newest messages within `budget` tokens, oldest first."""
        for limit in (HISTORY_ROWS, MORE_ROWS):
            got = prefetched if limit == HISTORY_ROWS else None
            if got is None or got.session_id != session_id:
                got = self.wire(session_id, await self.conversation.history(session_id, limit))
            history = trim_history(got.wire, budget, got.costs)
            if got.rows < limit or len(history) < got.rows:
                break
        return history
