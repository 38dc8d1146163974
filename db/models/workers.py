"""Telegram updates already taken by a worker: durable de-duplication of webhook retries."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Index
from sqlalchemy.orm import Mapped, mapped_column

from db.models.base import Base, UTCDateTime, utcnow


class TelegramUpdate(Base):
    __tablename__ = "telegram_updates"
    __table_args__ = (Index("ix_telegram_updates_received", "received_at"),)

    update_id: Mapped[int] = mapped_column(BigInteger, primary_key=True, autoincrement=False)
    received_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
