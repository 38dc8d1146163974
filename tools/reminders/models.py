"""Reminders and scheduled tasks: the jobs, the ledger of their runs, per-user quiet hours.
A job keeps its next run (UTC): the due check is one indexed query, and a run missed while
the bot was down is still there at the next start. A run is one ledger row, unique per
(job, due time), so it is never claimed twice.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from db.models.base import Base, UTCDateTime, utcnow


class ScheduledJob(Base):
    __tablename__ = "scheduled_jobs"
    __table_args__ = (
        Index("ix_scheduled_jobs_due", "status", "next_run_at"),
        Index("ix_scheduled_jobs_user", "user_id", "status"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    kind: Mapped[str] = mapped_column(String(10))  # reminder | task
    text: Mapped[str] = mapped_column(Text)  # the reminder's text, or the task's prompt
    words: Mapped[str] = mapped_column(Text, default="")  # the user's own words for the time
    schedule: Mapped[str] = mapped_column(String(8))  # at | every | cron
    timezone: Mapped[str] = mapped_column(String(64))  # the zone its wall-clock times are in
    first_at: Mapped[datetime | None] = mapped_column(UTCDateTime)  # at / every: first run
    every_s: Mapped[int | None] = mapped_column(Integer)  # every: the interval
    at_time: Mapped[str | None] = mapped_column(String(5))  # cron: HH:MM local
    days: Mapped[int] = mapped_column(Integer, default=127)  # cron: weekday bits, Monday = 1
    status: Mapped[str] = mapped_column(
        String(10), default="active"
    )  # active|paused|done|cancelled
    paused_reason: Mapped[str | None] = mapped_column(String(40))  # e.g. "blocked" (403)
    next_run_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class JobRun(Base):
    __tablename__ = "job_runs"
    __table_args__ = (
        UniqueConstraint("job_id", "due_at", name="uq_job_runs_job_due"),
        Index("ix_job_runs_pending", "status", "deliver_after"),
        Index("ix_job_runs_user", "user_id", "id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    job_id: Mapped[int] = mapped_column(ForeignKey("scheduled_jobs.id", ondelete="CASCADE"))
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    due_at: Mapped[datetime] = mapped_column(UTCDateTime)
    deliver_after: Mapped[datetime] = mapped_column(UTCDateTime)  # quiet hours, retry backoff
    started_at: Mapped[datetime] = mapped_column(UTCDateTime)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    status: Mapped[str] = mapped_column(String(16), default="pending")
    # pending | sent | failed | delivery_failed | skipped
    text: Mapped[str | None] = mapped_column(Text)  # what is (to be) sent; NULL: task not run yet
    note: Mapped[str | None] = mapped_column(String(200))  # "late: was due 07:00", ...
    message_id: Mapped[int | None] = mapped_column(BigInteger)  # Telegram's, when delivered
    # The status once delivered: sent, or failed for the notice that a task failed.
    outcome: Mapped[str] = mapped_column(String(16), default="sent")
    attempts: Mapped[int] = mapped_column(Integer, default=0)  # delivery attempts so far
    error: Mapped[str | None] = mapped_column(Text)


class ReminderPrefs(Base):
    """Per-user reminder settings: quiet hours (HH:MM local, may wrap midnight)."""

    __tablename__ = "reminder_prefs"

    user_id: Mapped[int] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), primary_key=True
    )
    quiet_start: Mapped[str | None] = mapped_column(String(5))
    quiet_end: Mapped[str | None] = mapped_column(String(5))
