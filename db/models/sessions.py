"""The archive state of a chat session: its summary and where archiving stands.

One row per session that archiving has touched. A session is archived when
`archived_at` is set; until then failed attempts are counted and retried with backoff.
Kept in its own table so the core sessions table stays as the foundation made it.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Index, Integer, Text
from sqlalchemy.orm import Mapped, mapped_column

from db.models.base import Base, UTCDateTime


class SessionArchive(Base):
    __tablename__ = "session_archives"
    __table_args__ = (Index("ix_session_archives_pending", "archived_at", "retry_at"),)

    session_id: Mapped[int] = mapped_column(
        ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True
    )
    # The checked summary, saved before it is stored as memory so a retry reuses it.
    summary: Mapped[str | None] = mapped_column(Text)
    # The `short` memory holding the summary (no FK: memories live in another module).
    memory_id: Mapped[int | None] = mapped_column(Integer)
    archived_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    last_error: Mapped[str | None] = mapped_column(Text)
    # No new attempt before this instant (backoff after a failure).
    retry_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
