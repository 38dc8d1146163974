"""Code tool tables: every run of model-written code, and background generation jobs."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from db.models.base import Base, UTCDateTime, utcnow


class CodeExecution(Base):
    """One run, whatever its outcome (timeouts, kills, sandbox failures included)."""

    __tablename__ = "code_executions"
    __table_args__ = (Index("ix_code_executions_user_time", "user_id", "created_at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    session_id: Mapped[int | None] = mapped_column(ForeignKey("sessions.id", ondelete="SET NULL"))
    trigger_message: Mapped[int | None] = mapped_column(
        ForeignKey("messages.id", ondelete="SET NULL")
    )
    tool_call_id: Mapped[str] = mapped_column(String(100), default="")
    llm_reasoning: Mapped[str] = mapped_column(Text, default="")
    code: Mapped[str] = mapped_column(Text, default="")
    stdout: Mapped[str] = mapped_column(Text, default="")
    stderr: Mapped[str] = mapped_column(Text, default="")
    stdout_truncated: Mapped[bool] = mapped_column(Boolean, default=False)
    stderr_truncated: Mapped[bool] = mapped_column(Boolean, default=False)
    exit_code: Mapped[int | None] = mapped_column(Integer)
    duration_ms: Mapped[float] = mapped_column(default=0.0)
    timeout_ms: Mapped[int] = mapped_column(Integer, default=0)
    success: Mapped[bool] = mapped_column(Boolean, default=False)
    error_category: Mapped[str | None] = mapped_column(String(20))
    sandbox_mode: Mapped[str] = mapped_column(String(10), default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class CodeJob(Base):
    """A `generate` request: pending until its background task stores code or an error."""

    __tablename__ = "code_jobs"

    id: Mapped[str] = mapped_column(String(32), primary_key=True)
    user_id: Mapped[int | None] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), index=True
    )
    session_id: Mapped[int | None] = mapped_column(ForeignKey("sessions.id", ondelete="SET NULL"))
    task: Mapped[str] = mapped_column(Text, default="")
    context: Mapped[str] = mapped_column(Text, default="")
    generator: Mapped[str] = mapped_column(String(20), default="llm")
    status: Mapped[str] = mapped_column(
        String(12), default="pending"
    )  # pending|done|failed|interrupted|aborted
    code: Mapped[str | None] = mapped_column(Text)
    error: Mapped[str | None] = mapped_column(Text)
    # Which process runs it: a pending job owned by another (earlier) process is orphaned.
    owner: Mapped[str] = mapped_column(String(40), default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # The trace of an OpenCode job (generator "opencode"): the model it used, its steps,
    # how long it ran, the files it wrote (paths below its work dir, one a line) and its
    # summary; delivered_at: when the user was sent the result (None: not yet).
    model: Mapped[str] = mapped_column(String(200), default="", server_default="")
    steps: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    duration_ms: Mapped[float] = mapped_column(default=0.0, server_default="0")
    files: Mapped[str] = mapped_column(Text, default="", server_default="")
    summary: Mapped[str | None] = mapped_column(Text)
    delivered_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
