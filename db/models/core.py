"""Users, chat sessions, messages and the tool-call audit trail."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Boolean, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from db.models.base import Base, UTCDateTime, utcnow


class User(Base):
    __tablename__ = "users"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    # NULL for local users (the terminal chat), unique otherwise.
    telegram_id: Mapped[int | None] = mapped_column(BigInteger, unique=True)
    name: Mapped[str] = mapped_column(String(200), default="")
    timezone: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # Usage & models (migration 0008): the model picked with /model (NULL: LLM_MODEL), the
    # per-answer usage footer, and which budget warnings were given (JSON: limit -> period).
    llm_model: Mapped[str | None] = mapped_column(String(200))
    usage_footer: Mapped[bool] = mapped_column(Boolean, default=False)
    usage_warned: Mapped[str | None] = mapped_column(Text)


class ChatSession(Base):
    __tablename__ = "sessions"
    __table_args__ = (Index("ix_sessions_user_open", "user_id", "ended_at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(200), default="")
    started_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    ended_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # The group this session is held in; NULL: the user's own chat (private, or the
    # terminal). A group answer's history is that group's turns only (migration 0028).
    chat_id: Mapped[int | None] = mapped_column(BigInteger)


class Message(Base):
    __tablename__ = "messages"
    __table_args__ = (Index("ix_messages_session", "session_id", "id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    session_id: Mapped[int] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"))
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    role: Mapped[str] = mapped_column(String(16))  # user | assistant | tool
    content: Mapped[str] = mapped_column(Text, default="")
    tool_calls: Mapped[str | None] = mapped_column(Text)  # JSON list, OpenAI shape
    tool_call_id: Mapped[str | None] = mapped_column(String(100))
    tool_name: Mapped[str | None] = mapped_column(String(100))
    request_id: Mapped[str] = mapped_column(String(40), index=True)
    telegram_message_id: Mapped[int | None] = mapped_column(BigInteger)
    # The Telegram chat a user message came from (a group's, or None: the user's own chat),
    # where its turn goes on after a restart.
    chat_id: Mapped[int | None] = mapped_column(BigInteger)
    # What the user sent: text, voice, audio, video_note, photo, document, album.
    kind: Mapped[str] = mapped_column(String(16), default="text", server_default="text")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # A user turn's [context] block as it was sent (time, recalled memories): later requests
    # send the turn with it again, so each request extends the previous one byte for byte.
    context: Mapped[str | None] = mapped_column(Text)


# The columns a prompt shows of a stored message (the history read with a turn, a turn a
# restart cut, a long session's older pages) and the summary's size rule reads (the day):
# one list, on the table, so a read builds plain rows and no ORM objects.
SHOWN = tuple(
    Message.__table__.c[name]
    for name in ("id", "role", "content", "tool_calls", "tool_call_id", "context", "created_at")
)


class ToolCallRecord(Base):
    """Audit trail: one row per tool call, written by the runtime."""

    __tablename__ = "tool_calls"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    request_id: Mapped[str] = mapped_column(String(40), index=True)
    session_id: Mapped[int | None] = mapped_column(
        ForeignKey("sessions.id", ondelete="SET NULL"), index=True
    )
    user_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    tool_call_id: Mapped[str] = mapped_column(String(100), default="")
    tool: Mapped[str] = mapped_column(String(100))
    arguments: Mapped[str] = mapped_column(Text, default="")
    result: Mapped[str] = mapped_column(Text, default="")  # truncated
    ok: Mapped[bool] = mapped_column(Boolean, default=True)
    error: Mapped[str | None] = mapped_column(Text)
    duration_ms: Mapped[float] = mapped_column(default=0.0)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
