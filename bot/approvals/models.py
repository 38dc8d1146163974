"""Approvals: the tools a user allowed for good ("Always for this tool"), and the audit of
every question and decision (allowed once or always, denied, timed out, revoked)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    BigInteger,
    Boolean,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    false,
)
from sqlalchemy.orm import Mapped, mapped_column

from db.models.base import Base, UTCDateTime


class ApprovalGrant(Base):
    __tablename__ = "approval_grants"
    __table_args__ = (UniqueConstraint("user_id", "tool", name="uq_approval_grants_user_tool"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)  # what a revoke button names
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    tool: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    # Given on a question a scheduled task's run asked: covers those unattended runs too.
    # A grant given in a chat covers chats only.
    scheduled: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())


class ApprovalDecision(Base):
    __tablename__ = "approval_log"
    __table_args__ = (Index("ix_approval_log_user", "user_id", "created_at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    # Who may answer, then who did (None: the terminal's local user; nobody, at a timeout).
    by_telegram_id: Mapped[int | None] = mapped_column(BigInteger)
    tool: Mapped[str] = mapped_column(String(64))
    action: Mapped[str] = mapped_column(Text)  # what was asked, secrets masked
    # pending (asked, no answer yet) | once | always | denied | timeout | revoked |
    # closed (the owner removed the person before they answered)
    decision: Mapped[str] = mapped_column(String(16))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)  # asked
    decided_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # Asked for a scheduled task's run (an "always" answer then grants those runs too).
    scheduled: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
