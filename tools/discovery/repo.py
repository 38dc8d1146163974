"""Recording successful tool calls and reading back each user's most used tools."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from tools.discovery.models import ToolUsage

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
