"""Learning from use: each successful tool call is recorded (the tool_usage table's SQL), and
each user's favourites are read back.

Counts are cached in memory (loaded once at start, updated on every record) because the
per-request tool set is chosen synchronously; the table stays the source of truth.
"""

from __future__ import annotations

import logging
from collections import Counter
from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from db.engine import SessionFactory
from tools.base import Clock
from tools.discovery.models import ToolUsage

log = logging.getLogger(__name__)

REQUEST_TEXT_LIMIT = 500  # characters of the request kept: enough to learn from, not a transcript


async def record_usage(
    s: AsyncSession, *, user_id: int, tool: str, request_text: str, now: datetime
) -> None:
    s.add(
        ToolUsage(
            user_id=user_id, tool=tool, request_text=request_text[:REQUEST_TEXT_LIMIT], used_at=now
        )
    )
    await s.flush()


async def usage_counts(s: AsyncSession) -> list[tuple[int, str, int, datetime]]:
    """(user_id, tool, uses, last use) for every user and tool, most used first."""
    last = func.max(ToolUsage.used_at)
    count = func.count(ToolUsage.id)
    stmt = (
        select(ToolUsage.user_id, ToolUsage.tool, count, last)
        .group_by(ToolUsage.user_id, ToolUsage.tool)
        .order_by(count.desc(), last.desc())
    )
    return [(r[0], r[1], int(r[2]), r[3]) for r in await s.execute(stmt)]


class UsageStore:
    def __init__(self, session_factory: SessionFactory, clock: Clock) -> None:
        self.session_factory = session_factory
        self.clock = clock
        self.counts: dict[int, Counter[str]] = {}
        self.last: dict[tuple[int, str], datetime] = {}

    async def load(self) -> None:
        async with self.session_factory() as s:
            rows = await usage_counts(s)
        self.counts.clear()
        for user_id, tool, uses, last in rows:
            self.counts.setdefault(user_id, Counter())[tool] = uses
            self.last[(user_id, tool)] = last

    async def record(self, user_id: int, tool: str, request_text: str) -> None:
        now = self.clock()
        try:
            async with self.session_factory() as s, s.begin():
                await record_usage(
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
