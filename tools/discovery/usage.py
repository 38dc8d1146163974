"""Learning from use: successful calls are recorded, and each user's favourites read back.

Counts are cached in memory (loaded once at start, updated on every record) because the
per-request tool set is chosen synchronously; the table stays the source of truth.
"""

from __future__ import annotations

import logging
from collections import Counter
from datetime import datetime

from db.engine import SessionFactory
from tools.base import Clock
from tools.discovery import repo

log = logging.getLogger(__name__)


class UsageStore:
    def __init__(self, session_factory: SessionFactory, clock: Clock) -> None:
        self.session_factory = session_factory
        self.clock = clock
        self.counts: dict[int, Counter[str]] = {}
        self.last: dict[tuple[int, str], datetime] = {}

    async def load(self) -> None:
        async with self.session_factory() as s:
            rows = await repo.usage_counts(s)
        self.counts.clear()
        for user_id, tool, uses, last in rows:
            self.counts.setdefault(user_id, Counter())[tool] = uses
            self.last[(user_id, tool)] = last

    async def record(self, user_id: int, tool: str, request_text: str) -> None:
        now = self.clock()
        try:
            async with self.session_factory() as s, s.begin():
                await repo.record_usage(
                    s, user_id=user_id, tool=tool, request_text=request_text, now=now
                )
        except Exception:  # learning is a nicety; the call itself already succeeded
            log.exception("recording tool usage failed")
            return
        self.counts.setdefault(user_id, Counter())[tool] += 1
        self.last[(user_id, tool)] = now

    def favourites(self, user_id: int) -> list[str]:
        """Tool names this user called successfully, most used (then most recent) first."""
        counts = self.counts.get(user_id)
        if not counts:
            return []

        def key(name: str) -> tuple[int, float]:
            last = self.last.get((user_id, name))
            return (counts[name], last.timestamp() if last else 0.0)

        return sorted(counts, key=key, reverse=True)
