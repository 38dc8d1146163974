"""The voice reply mode per user; no row means the default (auto)."""

from __future__ import annotations

from typing import Literal

from sqlalchemy.ext.asyncio import AsyncSession

from bot.voice.models import VoicePrefs

Mode = Literal["on", "off", "auto"]
MODES: tuple[Mode, ...] = ("on", "off", "auto")
DEFAULT_MODE = "auto"


async def mode_of(s: AsyncSession, user_id: int) -> str:
    row = await s.get(VoicePrefs, user_id)
    return row.mode if row is not None else DEFAULT_MODE


async def set_mode(s: AsyncSession, user_id: int, mode: Mode) -> None:
    row = await s.get(VoicePrefs, user_id)
    if row is None:
        s.add(VoicePrefs(user_id=user_id, mode=mode))
    else:
        row.mode = mode
