"""What `sidekick status` tells of the conversation: messages since a time, the last answer,
and the deliveries still owed."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from db.models.core import Message
from db.models.outbox import OutboxMessage


@dataclass(frozen=True)
class Activity:
    messages: int  # the users' messages since the given time
    last_answer: datetime | None
    queued: int  # outbox messages not yet sent


async def activity(s: AsyncSession, since: datetime) -> Activity:
    messages = await s.scalar(
        select(func.count()).where(Message.role == "user", Message.created_at >= since)
    )
    last = await s.scalar(select(func.max(Message.created_at)).where(Message.role == "assistant"))
    queued = await s.scalar(
        select(func.count()).where(OutboxMessage.sent_at.is_(None), OutboxMessage.kind != "settled")
    )
    # func.max reads the column raw: the type's "aware UTC" conversion is applied here.
    return Activity(messages or 0, _utc(last), queued or 0)


def _utc(value: datetime | str | None) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, str):  # SQLite hands an aggregate back as text
        value = datetime.fromisoformat(value)
    return value if value.tzinfo else value.replace(tzinfo=UTC)
