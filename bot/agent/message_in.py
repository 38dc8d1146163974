"""Store a user's message before any model call: find (or make) the user and their current
session, insert the message and read the session's newest history, in one transaction.

On SQLite, when the user and their current session exist (the common case), all of it is
one trip to the driver's thread with the commit (db/repos/last_writes.start_request_commit);
otherwise (a new user, a rename, a new session, PostgreSQL) statement by statement."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession

from bot.agent.sessions import period_ended
from bot.config import Settings
from db.engine import SessionFactory, engine_of
from db.models.core import User
from db.repos import core as repo
from db.repos import last_writes

HISTORY_ROWS = 64  # newest history rows read with the user's message

# (user, session id, has memories, message id, newest history rows)
Stored = tuple[User | last_writes.StartUser, int, bool, int, Sequence[last_writes.AnyHistoryRow]]


async def store_message(
    session_factory: SessionFactory,
    settings: Settings,
    *,
    telegram_user_id: int | None,
    user_name: str,
    message: repo.MessageFields,
) -> Stored:
    """`message` without its session and user ids (set here, once they are known)."""
    now = message["now"]

    def period_over(started: datetime, tz_name: str | None) -> bool:
        # bot/agent/sessions.period_ended's check; run in the driver's thread
        return settings.session_policy.is_due(started, now, tz_name)

    engine = engine_of(session_factory)
    if engine.dialect.name == "sqlite":
        # No ORM on this path: a bare connection, lighter than a session.
        async with engine.connect() as conn:
            fast = await last_writes.start_request_commit(
                conn,
                telegram_id=telegram_user_id,
                user_name=user_name,
                period_over=period_over,
                history_limit=HISTORY_ROWS,
                **message,
            )
        if fast is not None:
            return fast
    async with session_factory() as s, s.begin():
        return await _in_steps(s, settings, telegram_user_id, user_name, message)


async def _in_steps(
    s: AsyncSession,
    settings: Settings,
    telegram_user_id: int | None,
    user_name: str,
    message: repo.MessageFields,
) -> Stored:
    """store_message statement by statement: a new user, a rename, a new session, and
    PostgreSQL."""
    now = message["now"]
    user, session, has_memories = await repo.request_start(s, telegram_user_id)
    if user is None:
        user = await repo.get_or_create_user(s, telegram_user_id, user_name, now)
    elif user_name and user.name != user_name:
        user.name = user_name
    # A message after the split time opens a new session even if the scheduler has not
    # archived the old one yet (bot/agent/sessions.py).
    if session is not None and await period_ended(s, settings, session, user.timezone, now):
        session = None
    if session is None:
        session = await repo.create_session(s, user.id, None, now)
    # The message, then the newest rows of the history read while the connection is at
    # hand (the prompt builder reads more only when these do not fill the budget), ending
    # the transaction: on SQLite one trip with the commit.
    fields: repo.MessageFields = {**message, "session_id": session.id, "user_id": user.id}
    message_id, rows = await last_writes.add_message_history_commit(
        s, history_limit=HISTORY_ROWS, **fields
    )
    return user, session.id, has_memories, message_id, rows
