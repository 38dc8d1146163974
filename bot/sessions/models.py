"""The sessions feature's tables. SessionArchive: one row per session archiving touched (its
state, failures with backoff, and the leases that let one process at a time write a session's
summaries). SessionCompression: a summary standing in for a range of a long session's oldest
turns in the prompt (verified), or why one was not used (rejected), so it is written once."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, ForeignKey, Index, Integer, Text
from sqlalchemy.orm import Mapped, mapped_column

from db.models.base import Base, UTCDateTime, utcnow


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
    # Leases: a writer of the archive summary (the split job, /newsession, another worker)
    # or of a compression summary holds one until then; one that dies leaves it to expire.
    claimed_until: Mapped[datetime | None] = mapped_column(UTCDateTime)
    compressing_until: Mapped[datetime | None] = mapped_column(UTCDateTime)


class SessionCompression(Base):
    __tablename__ = "session_compressions"
    __table_args__ = (Index("ix_session_compressions_session", "session_id", "id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    session_id: Mapped[int] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"))
    # The covered range: message ids (for queries) and positions in the session (for the model).
    first_message_id: Mapped[int] = mapped_column(Integer)
    last_message_id: Mapped[int] = mapped_column(Integer)
    first_turn: Mapped[int] = mapped_column(Integer)
    last_turn: Mapped[int] = mapped_column(Integer)
    covers_from: Mapped[datetime] = mapped_column(UTCDateTime)
    covers_to: Mapped[datetime] = mapped_column(UTCDateTime)
    summary: Mapped[str] = mapped_column(Text, default="")
    verified: Mapped[bool] = mapped_column(Boolean, default=False)
    reason: Mapped[str | None] = mapped_column(Text)  # why it was rejected
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
