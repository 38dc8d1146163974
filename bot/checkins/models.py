"""Check-ins: a person's choices (off by default), the groups where a member asked for a
brief, and one ledger row per person, chat, slot and local day, claimed before anything runs."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from db.models.base import Base, UTCDateTime, utcnow


class CheckinPrefs(Base):
    __tablename__ = "checkin_prefs"

    user_id: Mapped[int] = mapped_column(
        ForeignKey("users.id", ondelete="CASCADE"), primary_key=True
    )
    enabled: Mapped[bool] = mapped_column(Boolean, default=False)
    brief_at: Mapped[str] = mapped_column(String(5), default="08:30")  # HH:MM, the person's zone
    quiet_start: Mapped[str] = mapped_column(String(5), default="22:00")
    quiet_end: Mapped[str] = mapped_column(String(5), default="08:00")
    max_per_day: Mapped[int] = mapped_column(Integer, default=2)
    topic: Mapped[str] = mapped_column(Text, default="")  # "a short look at …"
    useful: Mapped[int] = mapped_column(Integer, default=0)  # presses of "useful"
    less: Mapped[int] = mapped_column(Integer, default=0)  # presses of "less of this"


class CheckinGroup(Base):
    """A group where a member sent /checkins on: its morning brief goes to the group, at the
    time set there, within that member's quiet hours, daily cap and budget (it is their
    request, recorded and metered as theirs). A group nobody asked in has no row."""

    __tablename__ = "checkin_groups"

    chat_id: Mapped[int] = mapped_column(BigInteger, primary_key=True)  # the group's (negative)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    brief_at: Mapped[str] = mapped_column(String(5), default="08:30")  # HH:MM, the member's zone
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class CheckinRun(Base):
    __tablename__ = "checkin_runs"
    __table_args__ = (
        UniqueConstraint("user_id", "chat_id", "day", "slot", name="uq_checkin_runs_slot"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    # Where it goes: 0 the person's private chat, else the group's chat id (not NULL, so the
    # unique row guards private runs too).
    chat_id: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    day: Mapped[str] = mapped_column(String(10))  # the person's local date, YYYY-MM-DD
    slot: Mapped[str] = mapped_column(String(10))  # brief | followup
    # running | sent | nothing (the model had nothing worth saying) | capped | budget | failed
    status: Mapped[str] = mapped_column(String(10), default="running")
    started_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    cost_usd: Mapped[float | None] = mapped_column(Float)
    note: Mapped[str | None] = mapped_column(Text)
