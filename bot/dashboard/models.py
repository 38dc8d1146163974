"""Sign-in tokens: one-time links (/dashboard) and the sessions they open. Only a digest of
each token is kept, so a copy of the database signs no one in."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from db.models.base import Base, UTCDateTime


class DashboardToken(Base):
    __tablename__ = "dashboard_tokens"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    kind: Mapped[str] = mapped_column(String(8))  # link | session
    digest: Mapped[str] = mapped_column(String(64), unique=True)  # sha256 of the token
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)
    used_at: Mapped[datetime | None] = mapped_column(UTCDateTime)  # a link, once
