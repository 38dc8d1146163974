"""Turns a restart cut, as they are continued: how often one was taken up again, and
whether it was given up. A row is written only at start-up, for a turn found cut; the
turns that finish (nearly all) never get one.

And the writing tool calls running now: a row as each starts (past its gates), until its
round is recorded, so a continuation knows a call a restart cut mid-run and does not run it
again."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from db.models.base import Base, UTCDateTime


class TurnResume(Base):
    __tablename__ = "turn_resumes"

    # The user's message whose turn was cut (messages.id).
    message_id: Mapped[int] = mapped_column(
        ForeignKey("messages.id", ondelete="CASCADE"), primary_key=True, autoincrement=False
    )
    # Continuations started. The claim that starts one is the write that decides which
    # worker continues the turn; one cut again counts as a second crash of the turn.
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    claimed_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    given_up_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class RoundInFlight(Base):
    __tablename__ = "rounds_in_flight"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    request_id: Mapped[str] = mapped_column(String(40), index=True)
    call_id: Mapped[str] = mapped_column(String(100))  # the call that started
    # The assistant message with its calls, as sent back to the model (JSON).
    message: Mapped[str] = mapped_column(Text)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime)
