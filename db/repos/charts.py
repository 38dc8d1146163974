"""The rows the /usage chart is drawn from (bucketed by day in tools/charts.py)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from db.models.usage import ModelUsage


async def usage_rows(
    s: AsyncSession, user_id: int | None, since: datetime
) -> list[tuple[datetime, str, int, float | None]]:
    """(when, purpose, tokens in + out, USD or None) of model calls since `since`;
    `user_id` None: everyone's."""
    stmt = select(
        ModelUsage.at,
        ModelUsage.purpose,
        ModelUsage.prompt_tokens + ModelUsage.completion_tokens,
        ModelUsage.cost_usd,
    ).where(ModelUsage.at >= since)
    if user_id is not None:
        stmt = stmt.where(ModelUsage.user_id == user_id)
    return [(r[0], str(r[1]), int(r[2] or 0), r[3]) for r in (await s.execute(stmt)).all()]
