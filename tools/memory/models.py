"""Memories: one row per remembered thing, with its source (session, message) and lifetime.

The embedding lives in the sqlite-vec table `memory_vec` and the words in the FTS5 table
`memory_fts` (both virtual tables created by migration 0003, written by tools/memory/repo.py
in the same transaction as the row here).
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Float, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from db.models.base import Base, UTCDateTime, utcnow


class Memory(Base):
    __tablename__ = "memories"
    __table_args__ = (
        Index("ix_memories_user_layer", "user_id", "layer", "id"),
        # Auto-recall's long-term order (repo.top_long), read backwards to its limit.
        Index("ix_memories_user_layer_rank", "user_id", "layer", "certainty", "updated_at"),
        # The memory list's order (repo.page), with the columns "alive" reads: its count
        # reads only the index, and a page walks it in order instead of sorting them all.
        Index(
            "ix_memories_user_alive", "user_id", "superseded_by", "updated_at", "id", "expires_at"
        ),
        Index("ix_memories_expires", "expires_at"),
        Index("ix_memories_session", "session_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    layer: Mapped[str] = mapped_column(String(16))  # long | mid | short | session
    content: Mapped[str] = mapped_column(Text)
    category: Mapped[str | None] = mapped_column(String(40))
    certainty: Mapped[float] = mapped_column(Float, default=1.0)
    # Where it came from, so the user can see the source; kept when those rows go.
    session_id: Mapped[int | None] = mapped_column(ForeignKey("sessions.id", ondelete="SET NULL"))
    message_id: Mapped[int | None] = mapped_column(ForeignKey("messages.id", ondelete="SET NULL"))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # The group it was said in; NULL: the user's own chat. A group reads only its own.
    chat_id: Mapped[int | None] = mapped_column(BigInteger)
    # The newer memory that replaced this one; the row stays as its history, out of recall.
    superseded_by: Mapped[int | None] = mapped_column(Integer)
    superseded_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # NULL: never expires (long layer; session memories end with their session instead).
    expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class MemoryMeta(Base):
    """Key/value facts about the index: the embedding model and dimension it was built with."""

    __tablename__ = "memory_meta"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(Text, default="")
