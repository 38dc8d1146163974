"""The sessions feature's tables (the core sessions and messages stay in db/models/core.py).

SessionArchive, the archive state of a chat session: one row per session that archiving
has touched. A session is archived when `archived_at` is set; until then failed attempts
are counted and retried with backoff. Its leases make one process at a time write a
session's summaries (a model call of minutes on a slow local server). Kept in its own
table so the core sessions table stays as the foundation made it.

SessionCompression, summaries that stand in for a range of a long session's oldest turns
in the prompt. The turns themselves stay in `messages`; a row says "turns first..last are
summarised by this text" (verified) or records why a summary was not used (rejected), so
the summary is written once, not on every message, and rejections can be counted.
"""

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
