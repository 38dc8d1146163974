"""The outbox: messages owed to users (db/models/outbox.py), and the user messages a
restart left without an answer."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import and_, exists, insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from db.models.core import Message, User
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


@dataclass(frozen=True)
class Unanswered:
    user_id: int
    chat_id: int
    telegram_message_id: int
    text: str


async def add(s: AsyncSession, rows: list[dict[str, Any]]) -> None:
    if rows:
        await s.execute(insert(OutboxMessage), rows)


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


async def unanswered(s: AsyncSession, since: datetime, before: datetime) -> list[Unanswered]:
    """Telegram users' messages from [since, before) that got no answer: no assistant
    message of the same request, and nothing in the outbox about them."""
    answer = aliased(Message)
    stmt = (
        select(Message.user_id, User.telegram_id, Message.telegram_message_id, Message.content)
        .join(User, User.id == Message.user_id)
        .where(
            Message.role == "user",
            Message.telegram_message_id.is_not(None),
            User.telegram_id.is_not(None),
            Message.created_at >= since,
            Message.created_at < before,
            ~exists().where(
                and_(answer.request_id == Message.request_id, answer.role == "assistant")
            ),
            ~exists().where(
                and_(
                    OutboxMessage.chat_id == User.telegram_id,
                    OutboxMessage.telegram_message_id == Message.telegram_message_id,
                )
            ),
        )
        .order_by(Message.id)
    )
    return [
        Unanswered(int(user_id), int(chat_id or 0), int(message_id or 0), text)
        for user_id, chat_id, message_id, text in (await s.execute(stmt)).all()
    ]
