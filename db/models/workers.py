"""Telegram updates taken by a worker: durable de-duplication of webhook retries, and the
queue position that keeps one chat's updates in order across workers."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Boolean, Index
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
