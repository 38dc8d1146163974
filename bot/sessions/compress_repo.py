"""Reading and writing session compressions (bot/sessions/models.py)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from bot.sessions.models import SessionCompression
from db.models.core import Message


async def latest(
    s: AsyncSession, session_id: int, *, verified: bool | None = None
) -> SessionCompression | None:
    """The session's newest compression (only verified or only rejected ones if asked)."""
    stmt = select(SessionCompression).where(SessionCompression.session_id == session_id)
    if verified is not None:
        stmt = stmt.where(SessionCompression.verified == verified)
    stmt = stmt.order_by(SessionCompression.id.desc()).limit(1)
    return (await s.execute(stmt)).scalars().first()


async def messages_after(s: AsyncSession, session_id: int, after_id: int) -> Sequence[Message]:
    """The session's messages after message id `after_id`, oldest first."""
    stmt = (
        select(Message)
        .where(Message.session_id == session_id, Message.id > after_id)
        .order_by(Message.id)
    )
    return list((await s.execute(stmt)).scalars())


async def add(s: AsyncSession, *, now: datetime, **fields: Any) -> SessionCompression:
    """One compression row (its columns as keywords), created `now`."""
    row = SessionCompression(**fields, created_at=now)
    s.add(row)
    await s.flush()
    return row


async def counts(s: AsyncSession) -> tuple[int, int]:
    """(verified, rejected) summaries, for doctor."""
    stmt = select(SessionCompression.verified, func.count()).group_by(SessionCompression.verified)
    found = {bool(v): int(n) for v, n in (await s.execute(stmt)).all()}
    return found.get(True, 0), found.get(False, 0)
