"""The voice reply mode per user; no row means the default (auto)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from db.models.core import User
from db.models.voice import VoicePrefs

DEFAULT_MODE = "auto"


async def mode_of(s: AsyncSession, user_id: int) -> str:
    row = await s.get(VoicePrefs, user_id)
    return row.mode if row is not None else DEFAULT_MODE


async def pref_by_telegram_id(s: AsyncSession, telegram_id: int) -> tuple[int | None, str]:
    """(users.id, mode) of a Telegram user; (None, the default) before their first message."""
    stmt = (
        select(User.id, VoicePrefs.mode)
        .outerjoin(VoicePrefs, VoicePrefs.user_id == User.id)
        .where(User.telegram_id == telegram_id)
    )
    row = (await s.execute(stmt)).first()
    if row is None:
        return None, DEFAULT_MODE
    return row[0], row[1] or DEFAULT_MODE


async def set_mode(s: AsyncSession, user_id: int, mode: str) -> None:
    row = await s.get(VoicePrefs, user_id)
    if row is None:
        s.add(VoicePrefs(user_id=user_id, mode=mode))
    else:
        row.mode = mode
