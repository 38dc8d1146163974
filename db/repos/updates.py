"""Claiming Telegram update ids, so a webhook update retried by Telegram (or delivered to two
workers) is handled once."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import delete
from sqlalchemy.exc import IntegrityError

from db.engine import SessionFactory
from db.models.workers import TelegramUpdate


async def claim(sf: SessionFactory, update_id: int, now: datetime) -> bool:
    """True for the first caller with this update id; False for every later one. The
    primary key decides, in its own transaction, so it holds across worker processes."""
    try:
        async with sf() as s, s.begin():
            s.add(TelegramUpdate(update_id=update_id, received_at=now))
        return True
    except IntegrityError:
        return False


async def prune(sf: SessionFactory, before: datetime) -> int:
    """Forget claims older than `before` (Telegram gives up retrying within a day)."""
    async with sf() as s, s.begin():
        res = await s.execute(delete(TelegramUpdate).where(TelegramUpdate.received_at < before))
        return int(res.rowcount or 0)  # type: ignore[attr-defined]
