"""The rows the /codestats chart is drawn from (bucketed by day in bot/); /usage's are in
bot/usage/repo.py."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from db.models.code import CodeExecution


async def code_runs(
    s: AsyncSession, user_id: int, since: datetime
) -> list[tuple[datetime, bool, str | None]]:
    """(when, succeeded, error category) of the user's runs since `since`."""
    stmt = select(
        CodeExecution.created_at, CodeExecution.success, CodeExecution.error_category
    ).where(CodeExecution.user_id == user_id, CodeExecution.created_at >= since)
    return [(r[0], bool(r[1]), r[2]) for r in (await s.execute(stmt)).all()]
