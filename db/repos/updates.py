"""Claiming Telegram update ids, so a webhook update retried by Telegram (or delivered to two
workers) is handled once, and telling whether a chat has an earlier update still in hand."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete, exists, select, update
from sqlalchemy.exc import IntegrityError

from db.engine import SessionFactory
from db.models.workers import TelegramUpdate


async def claim(sf: SessionFactory, update_id: int, chat_id: int | None, now: datetime) -> bool:
    """True for the first caller with this update id; False for every later one. The
    primary key decides, in its own transaction, so it holds across worker processes."""
    try:
        async with sf() as s, s.begin():
            s.add(TelegramUpdate(update_id=update_id, chat_id=chat_id, received_at=now))
        return True
    except IntegrityError:
        return False


async def earlier_pending(
    sf: SessionFactory, chat_id: int, update_id: int, since: datetime
) -> bool:
    """Whether an earlier update of this chat, claimed after `since`, is not done yet (a
    worker that claimed it is about to handle it; older claims count as abandoned)."""
    stmt = select(
        exists().where(
            TelegramUpdate.chat_id == chat_id,
            TelegramUpdate.update_id < update_id,
            TelegramUpdate.done.is_(False),
            TelegramUpdate.received_at > since,
        )
    )
    async with sf() as s:
        return bool((await s.execute(stmt)).scalar())


async def finish(sf: SessionFactory, update_id: int) -> None:
    async with sf() as s, s.begin():
        await s.execute(
            update(TelegramUpdate).where(TelegramUpdate.update_id == update_id).values(done=True)
        )


async def prune(sf: SessionFactory, before: datetime) -> int:
    """Forget claims older than `before` (Telegram gives up retrying within a day)."""
    async with sf() as s, s.begin():
        res = await s.execute(delete(TelegramUpdate).where(TelegramUpdate.received_at < before))
        return int(res.rowcount or 0)  # type: ignore[attr-defined]
