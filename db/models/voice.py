"""Per-user voice reply mode (/voice): on, off, or auto (a voice note gets a voice reply).

The voice feature (bot/voice/) owns this table and declares it, but it stays here, beside
the core tables: every message starts with one read of the user row (db/repos/core.py's
START_COLUMNS), which carries the mode as a subquery so the Telegram adapter can decide
whether to speak the answer without a read of its own (one more session and round trip
per message: about 1 ms of CPU measured on aiosqlite), and db/ never imports bot/."""

from __future__ import annotations

from sqlalchemy import ForeignKey, String
from sqlalchemy.orm import Mapped, mapped_column

from db.models.base import Base


class VoicePrefs(Base):
    __tablename__ = "voice_prefs"

    user_id: Mapped[int] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), primary_key=True
    )
    mode: Mapped[str] = mapped_column(String(8), default="auto")  # on | off | auto
