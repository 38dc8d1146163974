"""Telegram updates as they arrive (the inbox): durable de-duplication of webhook retries and
of updates polling fetches again after a kill, the queue position that keeps one chat's
updates in order across workers, and the update itself until it is handled, so one that
waited for its chat's turn when the process died is handled at the next start."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Boolean, Index, Integer, Text
from sqlalchemy.orm import Mapped, mapped_column

from db.models.base import Base, UTCDateTime, utcnow


class TelegramUpdate(Base):
    __tablename__ = "telegram_updates"
    __table_args__ = (
        Index("ix_telegram_updates_received", "received_at"),
        Index("ix_telegram_updates_chat", "chat_id", "update_id"),
    )

    update_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    chat_id: Mapped[int | None] = mapped_column(BigInteger)
    done: Mapped[bool] = mapped_column(Boolean, default=False)
    received_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # The update as JSON until it is handled (cleared with `done`).
    payload: Mapped[str | None] = mapped_column(Text)
    # Handlings started at start-up for an update a stop left waiting: the claim that lets
    # one worker take it up, and a bound for an update that takes the process down.
    replays: Mapped[int] = mapped_column(Integer, default=0)
