"""The sessions feature's SQL: archive state and summary leases, compressions, session
listings and user time zones."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import ColumnElement, and_, bindparam, case, func, or_, select, update
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from bot.sessions.models import SessionArchive, SessionCompression
from db.models.core import SHOWN, ChatSession, Message, User


@dataclass
class Candidate:
    session_id: int
    user_id: int
    name: str
    started_at: datetime
    ended_at: datetime | None
    timezone: str | None


@dataclass
class SessionLine:
    session_id: int
    name: str
    started_at: datetime
    ended_at: datetime | None
    messages: int
    summary: str | None
    archived: bool


def _not_waiting(now: datetime) -> ColumnElement[bool]:
    """Not in a retry backoff, and no writer holds the summary's lease."""
    return and_(
        or_(SessionArchive.retry_at.is_(None), SessionArchive.retry_at <= now),
        or_(SessionArchive.claimed_until.is_(None), SessionArchive.claimed_until <= now),
    )


async def _candidates(s: AsyncSession, *where: ColumnElement[bool]) -> list[Candidate]:
    stmt = (
        select(ChatSession, User.timezone)
        .join(User, User.id == ChatSession.user_id)
        .outerjoin(SessionArchive, SessionArchive.session_id == ChatSession.id)
        .where(*where)
        .order_by(ChatSession.id)
    )
    return [
        Candidate(c.id, c.user_id, c.name, c.started_at, c.ended_at, tz)
        for c, tz in (await s.execute(stmt)).all()
    ]


async def open_candidates(s: AsyncSession, now: datetime) -> list[Candidate]:
    return await _candidates(s, ChatSession.ended_at.is_(None), _not_waiting(now))


async def unarchived_ended(s: AsyncSession, now: datetime) -> list[Candidate]:
    ended = ChatSession.ended_at.is_not(None)
    return await _candidates(s, ended, SessionArchive.archived_at.is_(None), _not_waiting(now))


async def get_session(s: AsyncSession, session_id: int) -> ChatSession | None:
    return await s.get(ChatSession, session_id)


async def archive_row(s: AsyncSession, session_id: int) -> SessionArchive:
    """The session's archive state, created empty on first use."""
    row = await s.get(SessionArchive, session_id)
    if row is None:
        row = SessionArchive(session_id=session_id, attempts=0)
        s.add(row)
        await s.flush()
    return row


async def save_summary(s: AsyncSession, session_id: int, summary: str) -> str:
    """Keep the first summary written for a session; return the one that is kept."""
    row = await archive_row(s, session_id)
    if row.summary is None:
        row.summary = summary
        await s.flush()
    return row.summary


async def save_memory_id(s: AsyncSession, session_id: int, memory_id: int | None) -> None:
    row = await archive_row(s, session_id)
    row.memory_id = memory_id
    await s.flush()


async def close_session(s: AsyncSession, session_id: int, now: datetime) -> bool:
    result = await s.execute(
        update(ChatSession)
        .where(ChatSession.id == session_id, ChatSession.ended_at.is_(None))
        .values(ended_at=now)
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]


async def mark_archived(s: AsyncSession, session_id: int, now: datetime) -> bool:
    """End the session (if still open) and mark it archived; False if it already was."""
    row = await archive_row(s, session_id)
    if row.archived_at is not None:
        return False
    await close_session(s, session_id, now)
    row.archived_at = now
    row.last_error = None
    row.retry_at = None
    await s.flush()
    return True


Lease = Literal["claimed_until", "compressing_until"]


async def take_lease(
    s: AsyncSession, session_id: int, lease: Lease, now: datetime, until: datetime
) -> bool:
    """False when another writer holds it now. One conditional UPDATE: atomic on both
    databases, so two writers never both get it. The row must exist (archive_row)."""
    column = {
        "claimed_until": SessionArchive.claimed_until,
        "compressing_until": SessionArchive.compressing_until,
    }[lease]
    result = await s.execute(
        update(SessionArchive)
        .where(
            SessionArchive.session_id == session_id,
            or_(column.is_(None), column <= now),
        )
        .values({lease: until})
    )
    return bool(result.rowcount)  # type: ignore[attr-defined]


async def drop_lease(s: AsyncSession, session_id: int, lease: Lease) -> None:
    await s.execute(
        update(SessionArchive).where(SessionArchive.session_id == session_id).values({lease: None})
    )


async def record_failure(s: AsyncSession, session_id: int, error: str, retry_at: datetime) -> int:
    row = await archive_row(s, session_id)
    row.attempts = (row.attempts or 0) + 1
    row.last_error = error[:500]
    row.retry_at = retry_at
    await s.flush()
    return row.attempts


async def recent_sessions(s: AsyncSession, user_id: int, limit: int = 10) -> list[SessionLine]:
    stmt = (
        select(ChatSession, SessionArchive)
        .outerjoin(SessionArchive, SessionArchive.session_id == ChatSession.id)
        .where(ChatSession.user_id == user_id)
        .order_by(ChatSession.id.desc())
        .limit(limit)
    )
    rows = (await s.execute(stmt)).all()
    if not rows:
        return []
    # Counted for the listed sessions only (through the session index): a person's whole
    # history can be 100k messages, and /sessions shows ten.
    counted = (
        select(Message.session_id, func.count())
        # What the user sees as messages: not tool results nor bare tool-call turns.
        .where(
            Message.session_id.in_([c.id for c, _ in rows]),
            Message.user_id == user_id,
            Message.role.in_(("user", "assistant")),
            Message.content != "",
        )
        .group_by(Message.session_id)
    )
    counts = {sid: int(n) for sid, n in (await s.execute(counted)).all()}
    out = []
    for c, arch in rows:
        summary, archived = (arch.summary, arch.archived_at is not None) if arch else (None, False)
        n = counts.get(c.id, 0)
        out.append(SessionLine(c.id, c.name, c.started_at, c.ended_at, n, summary, archived))
    return out


async def set_user_timezone(s: AsyncSession, user_id: int, tz: str | None) -> None:
    await s.execute(update(User).where(User.id == user_id).values(timezone=tz))


async def users_timezones(s: AsyncSession) -> list[tuple[int, str | None]]:
    return [(uid, tz) for uid, tz in (await s.execute(select(User.id, User.timezone))).all()]


async def failing_archives(s: AsyncSession, min_attempts: int) -> list[tuple[int, str]]:
    """Unarchived sessions that failed at least `min_attempts` times: (id, last error)."""
    stmt = (
        select(SessionArchive.session_id, SessionArchive.last_error)
        .where(SessionArchive.archived_at.is_(None), SessionArchive.attempts >= min_attempts)
        .order_by(SessionArchive.attempts.desc())
    )
    return [(sid, err or "") for sid, err in (await s.execute(stmt)).all()]


# The history's reads, built once: a long session's every message runs them, and building
# a statement (and its cache key) cost more than SQLite's part of it.
_LATEST = (
    select(SessionCompression)
    .where(SessionCompression.session_id == bindparam("sid"), SessionCompression.verified)
    .order_by(SessionCompression.id.desc())
    .limit(1)
)


async def latest_verified(s: AsyncSession, session_id: int) -> SessionCompression | None:
    return (await s.execute(_LATEST, {"sid": session_id})).scalars().first()


# A rejected summary's range is tried again once the session has grown since: the rows
# newer than it (what it covered existed then: anything newer has a larger id), counted only
# after a rejection (CASE: SQLite and PostgreSQL skip the count for a verified one).
_NEWER = (
    select(func.count())
    .where(
        Message.session_id == SessionCompression.session_id,
        Message.id > SessionCompression.last_message_id,
        Message.created_at > SessionCompression.created_at,
    )
    .scalar_subquery()
)
_SINCE_REJECTED = (
    select(case((SessionCompression.verified, None), else_=_NEWER))
    .where(SessionCompression.session_id == bindparam("sid"))
    .order_by(SessionCompression.id.desc())
    .limit(1)
)


async def since_rejected(s: AsyncSession | AsyncConnection, session_id: int) -> int | None:
    """Messages since the session's newest compression was rejected; None when it has none or
    that one was verified."""
    return (await s.execute(_SINCE_REJECTED, {"sid": session_id})).scalar()


_LATEST_VERIFIED_ID = (
    select(func.coalesce(func.max(SessionCompression.id), 0))
    .where(SessionCompression.session_id == bindparam("sid"))
    .where(SessionCompression.verified.is_(True))
)


_SUMMARIES = select(_LATEST_VERIFIED_ID.scalar_subquery(), _SINCE_REJECTED.scalar_subquery())


async def summaries(s: AsyncSession | AsyncConnection, session_id: int) -> tuple[int, int | None]:
    """The newest verified compression's id (0: none) and since_rejected's count, in one
    statement: asked at every message of a session past its budget."""
    verified, grown = (await s.execute(_SUMMARIES, {"sid": session_id})).one()
    return int(verified), grown


async def messages_after(s: AsyncSession, session_id: int, after_id: int) -> list[Any]:
    # Plain rows of the SHOWN columns: a summary reads a hundred or more, and ORM instances
    # cost ~50 us each.
    params = {"sid": session_id, "after": after_id}
    return list((await s.execute(_AFTER, params)).all())


def _in_range(stmt: Any, before: bool) -> Any:
    stmt = stmt.where(Message.session_id == bindparam("sid"), Message.id > bindparam("after"))
    return stmt.where(Message.id < bindparam("before")) if before else stmt


_NEWEST = {
    b: _in_range(select(*SHOWN), b).order_by(Message.id.desc()).limit(bindparam("limit"))
    for b in (False, True)
}
_AFTER = _in_range(select(*SHOWN), False).order_by(Message.id)
_COUNT = _in_range(
    select(func.count(), func.coalesce(func.sum(case((Message.role == "user", 1), else_=0)), 0)),
    True,
)


async def newest_messages(
    s: AsyncSession | AsyncConnection,
    session_id: int,
    after_id: int,
    before_id: int | None,
    limit: int,
) -> list[Any]:
    """Up to `limit` of the newest with `after_id` < id < `before_id` (None: no bound),
    oldest first."""
    params = {"sid": session_id, "after": after_id, "before": before_id, "limit": limit}
    return list(reversed((await s.execute(_NEWEST[before_id is not None], params)).all()))


async def count_messages(
    s: AsyncSession | AsyncConnection, session_id: int, after_id: int, before_id: int
) -> tuple[int, int]:
    """Messages with `after_id` < id < `before_id`, and the person's turns among them."""
    params = {"sid": session_id, "after": after_id, "before": before_id}
    rows, turns = (await s.execute(_COUNT, params)).one()
    return int(rows), int(turns)


async def add_compression(s: AsyncSession, *, now: datetime, **fields: Any) -> SessionCompression:
    row = SessionCompression(**fields, created_at=now)
    s.add(row)
    await s.flush()
    return row


async def compression_counts(s: AsyncSession) -> tuple[int, int]:
    stmt = select(SessionCompression.verified, func.count()).group_by(SessionCompression.verified)
    found = {bool(v): int(n) for v, n in (await s.execute(stmt)).all()}
    return found.get(True, 0), found.get(False, 0)
