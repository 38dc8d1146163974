"""Turns a restart cut (a Telegram user's message without a final answer), and the claims
that continue them (db/models/resume.py)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    and_,
    bindparam,
    delete,
    exists,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import aliased

from db.models.core import SHOWN, Message, User
from db.models.outbox import OutboxMessage
from db.models.resume import RoundInFlight, TurnResume

# Where a user message came from: its group, or the user's own chat.
CHAT = func.coalesce(Message.chat_id, User.telegram_id)


@dataclass(frozen=True)
class Cut:
    message_id: int  # messages.id of the user's message
    user_id: int
    chat_id: int
    telegram_message_id: int
    text: str


def _cut() -> list[ColumnElement[bool]]:
    """A stored Telegram message whose turn has no final answer: no assistant message of the
    request without tool calls (a recorded tool round is not an answer), nothing in the
    outbox about it (an error line, an answer kept through an outage, a notice), not given
    up. Needs Message joined with its User."""
    answer, given_up = aliased(Message), aliased(TurnResume)
    return [
        Message.role == "user",
        Message.telegram_message_id.is_not(None),
        User.telegram_id.is_not(None),
        ~exists().where(
            and_(
                answer.request_id == Message.request_id,
                answer.role == "assistant",
                answer.tool_calls.is_(None),
            )
        ),
        ~exists().where(
            and_(
                OutboxMessage.chat_id == CHAT,
                OutboxMessage.telegram_message_id == Message.telegram_message_id,
            )
        ),
        ~exists().where(and_(given_up.message_id == Message.id, given_up.given_up_at.is_not(None))),
    ]


async def cut_turns(s: AsyncSession, since: datetime, before: datetime) -> list[Cut]:
    """The messages from [since, before) whose turn has no final answer, oldest first."""
    stmt = (
        select(
            Message.id,
            Message.user_id,
            CHAT,
            Message.telegram_message_id,
            Message.content,
        )
        .join(User, User.id == Message.user_id)
        .where(Message.created_at >= since, Message.created_at < before, *_cut())
        .order_by(Message.id)
    )
    return [
        Cut(int(mid), int(uid), int(chat or 0), int(tg or 0), text)
        for mid, uid, chat, tg, text in (await s.execute(stmt)).all()
    ]


async def tries(s: AsyncSession, message_id: int) -> int | None:
    """Continuations of this message's turn started so far; None when it is cut no more
    (answered or given up meanwhile)."""
    stmt = (
        select(TurnResume.attempts)
        .select_from(Message)
        .join(User, User.id == Message.user_id)
        .outerjoin(TurnResume, TurnResume.message_id == Message.id)
        .where(Message.id == message_id, *_cut())
    )
    row = (await s.execute(stmt)).first()
    return None if row is None else int(row[0] or 0)


async def claim(s: AsyncSession, message_id: int, seen: int, now: datetime) -> bool:
    """Start a continuation: True for exactly one caller that read `seen` tries. The first
    claim is an INSERT (the primary key decides between workers), a later one a
    compare-and-set on `attempts`."""
    if seen == 0:
        try:
            async with s.begin_nested():
                s.add(TurnResume(message_id=message_id, attempts=1, claimed_at=now))
            return True
        except IntegrityError:
            pass  # a row is there: a continuation stopped by a clean shutdown, or a rival's
    stmt = (
        update(TurnResume)
        .where(
            TurnResume.message_id == message_id,
            TurnResume.attempts == seen,
            TurnResume.given_up_at.is_(None),
        )
        .values(attempts=seen + 1, claimed_at=now)
    )
    return bool((await s.execute(stmt)).rowcount)  # type: ignore[attr-defined]


async def release(s: AsyncSession, message_id: int) -> None:
    """A continuation stopped by a clean shutdown: it does not count as a crash."""
    await s.execute(
        update(TurnResume)
        .where(TurnResume.message_id == message_id, TurnResume.attempts > 0)
        .values(attempts=TurnResume.attempts - 1, claimed_at=None)
    )


async def give_up(
    s: AsyncSession, cut: Cut, now: datetime, notice: str, deliver_after: datetime
) -> int | None:
    """Mark the turn given up and queue the notice in the outbox (due at `deliver_after`),
    together; the outbox row's id, or None when another worker gave it up first."""
    marked = await s.execute(
        update(TurnResume)
        .where(TurnResume.message_id == cut.message_id, TurnResume.given_up_at.is_(None))
        .values(given_up_at=now)
    )
    if not marked.rowcount:  # type: ignore[attr-defined]
        return None
    # The round a restart cut is not taken up any more: its calls' records go with it.
    request = select(Message.request_id).where(Message.id == cut.message_id).scalar_subquery()
    await s.execute(delete(RoundInFlight).where(RoundInFlight.request_id == request))
    row: dict[str, Any] = {
        "chat_id": cut.chat_id, "user_id": cut.user_id,
        "telegram_message_id": cut.telegram_message_id, "kind": "notice", "text": notice,
        "created_at": now, "deliver_after": deliver_after, "attempts": 0,
    }  # fmt: skip
    return int(
        (await s.execute(insert(OutboxMessage).returning(OutboxMessage.id), row)).scalar_one()
    )


# A cut turn as it was recorded: its request and session, and the user's message.
TURN = (
    select(
        Message.user_id,
        User.telegram_id,
        Message.session_id,
        Message.request_id,
        Message.content,
        Message.kind,
        Message.telegram_message_id,
    )
    .join(User, User.id == Message.user_id)
    .where(Message.id == bindparam("message_id"), Message.role == "user")
)

# The session's history up to the cut turn's last record (the prompt's columns, as
# db/conversation.py's HISTORY), newest first; and how many tool calls the turn recorded.
_LAST = select(func.max(Message.id)).where(Message.request_id == bindparam("request_id"))
# (SHOWN holds the context as the turn was sent: the continued request extends it unchanged.)
HISTORY_UNTIL = (
    select(*SHOWN)
    .where(Message.session_id == bindparam("session_id"), Message.id <= _LAST.scalar_subquery())
    .order_by(Message.id.desc())
    .limit(bindparam("limit"))
)
TOOL_RESULTS = select(func.count()).where(
    Message.request_id == bindparam("request_id"), Message.role == "tool"
)

# The writing calls of the request that were running when the process stopped, with their
# round (one round runs at a time: they share it).
IN_FLIGHT = select(RoundInFlight.message, RoundInFlight.call_id).where(
    RoundInFlight.request_id == bindparam("request_id")
)
ADD_IN_FLIGHT = insert(RoundInFlight)
# A round recorded (or a continuation that took it over): no longer in flight.
LANDED = delete(RoundInFlight).where(RoundInFlight.request_id == bindparam("request_id"))
