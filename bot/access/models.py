"""Who was let in from the chat (beside ALLOWED_USER_IDS, the seed list in .env), and the
requests of strangers: one row per Telegram user or group, its state the latest decision."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from db.models.base import Base, UTCDateTime


class AccessEntry(Base):
    __tablename__ = "access"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    # A Telegram user id, or a group's chat id (negative): one row each.
    chat_id: Mapped[int] = mapped_column(BigInteger, unique=True)
    kind: Mapped[str] = mapped_column(String(8))  # user | group
    name: Mapped[str] = mapped_column(String(200), default="")
    # A group's request names who asked (their Telegram id), for the owner to see.
    asked_by: Mapped[int | None] = mapped_column(BigInteger)
    # pending: asked, the owner has not answered | allowed | denied | removed (by /users) |
    # owner: learned from the first private message when ALLOWED_USER_IDS was empty.
    state: Mapped[str] = mapped_column(String(8))
    asked_at: Mapped[datetime] = mapped_column(UTCDateTime)
    decided_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    decided_by: Mapped[int | None] = mapped_column(BigInteger)
