"""Messages the bot owes a user: an answer or a command's reply Telegram did not take (an
outage, 429, 5xx), or one queued behind those so a chat's replies keep their order, or a
notice about a message a restart left unanswered. A row is sent only with the message id
Telegram returned; `settled` rows only record that a user message was
answered some other way (the error reply), so a restart does not ask about it again."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, ForeignKey, Index, Integer, LargeBinary, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from db.models.base import Base, UTCDateTime, utcnow


class OutboxMessage(Base):
    __tablename__ = "outbox"
    __table_args__ = (
        Index("ix_outbox_pending", "sent_at", "deliver_after"),
        Index("ix_outbox_about", "user_id", "telegram_message_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    chat_id: Mapped[int] = mapped_column(BigInteger)
    user_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    # The user's message this is about (its Telegram id), when there is one.
    telegram_message_id: Mapped[int | None] = mapped_column(BigInteger)
    kind: Mapped[str] = mapped_column(String(16))  # answer | photo | document | notice | settled
    text: Mapped[str] = mapped_column(Text, default="")
    entities: Mapped[str | None] = mapped_column(Text)  # JSON list of Telegram entities
    markup: Mapped[str | None] = mapped_column(Text)  # JSON inline keyboard (buttons)
    # A photo's or document's bytes, until it is sent (then dropped), and its file name.
    data: Mapped[bytes | None] = mapped_column(LargeBinary)
    filename: Mapped[str | None] = mapped_column(String(255))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    deliver_after: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    sent_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    message_id: Mapped[int | None] = mapped_column(BigInteger)
    error: Mapped[str | None] = mapped_column(Text)
