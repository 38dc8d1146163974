"""Per-user voice reply mode (/voice): on, off, or auto (a voice note gets a voice reply).

The voice feature's own table; the Telegram adapter reads a user's mode after the answer,
only where voice replies are on (bot/voice/replies.py)."""

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
