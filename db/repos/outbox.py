"""The outbox: messages owed to users (db/models/outbox.py)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from db.models.outbox import OutboxMessage


@dataclass(frozen=True)
class Owed:
    id: int
    chat_id: int
    kind: str
    text: str
    entities: str | None
    markup: str | None
    data: bytes | None
    filename: str | None
    attempts: int
    created_at: datetime


async def add(s: AsyncSession, rows: list[dict[str, Any]]) -> list[int]:
    """Queue the rows; their ids, in the rows' order."""
    if not rows:
        return []
    stmt = insert(OutboxMessage).returning(OutboxMessage.id, sort_by_parameter_order=True)
    return list((await s.execute(stmt, rows)).scalars())


async def outcomes(
    s: AsyncSession, ids: list[int]
) -> list[tuple[int, datetime | None, int | None, str | None]]:
    """(id, sent_at, message_id, error) of the rows `ids`."""
    stmt = select(
        OutboxMessage.id, OutboxMessage.sent_at, OutboxMessage.message_id, OutboxMessage.error
    ).where(OutboxMessage.id.in_(ids))
    return [(r.id, r.sent_at, r.message_id, r.error) for r in (await s.execute(stmt)).all()]


async def pending(s: AsyncSession, now: datetime, limit: int = 100) -> list[Owed]:
    """Unsent rows due now, each chat's in the order they were queued."""
    stmt = (
        select(
            OutboxMessage.id,
            OutboxMessage.chat_id,
            OutboxMessage.kind,
            OutboxMessage.text,
            OutboxMessage.entities,
            OutboxMessage.markup,
            OutboxMessage.data,
            OutboxMessage.filename,
            OutboxMessage.attempts,
            OutboxMessage.created_at,
        )
        .where(
            OutboxMessage.sent_at.is_(None),
            OutboxMessage.kind != "settled",
            OutboxMessage.deliver_after <= now,
        )
        .order_by(OutboxMessage.chat_id, OutboxMessage.id)
        .limit(limit)
    )
    return [Owed(**row._mapping) for row in (await s.execute(stmt)).all()]


async def owed(s: AsyncSession, chat_id: int | None = None) -> bool:
    """Whether anything is still owed (to `chat_id`, or to anyone), due now or later."""
    stmt = select(OutboxMessage.id).where(
        OutboxMessage.sent_at.is_(None), OutboxMessage.kind != "settled"
    )
    if chat_id is not None:
        stmt = stmt.where(OutboxMessage.chat_id == chat_id)
    return (await s.execute(stmt.limit(1))).first() is not None


async def settle(s: AsyncSession, row_id: int, **values: Any) -> None:
    """Record the outcome of one delivery attempt (sent_at + message_id when it arrived, the
    file's bytes dropped; attempts/error for a retry; sent_at and error when given up)."""
    await s.execute(update(OutboxMessage).where(OutboxMessage.id == row_id).values(**values))
