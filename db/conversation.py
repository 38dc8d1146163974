"""The conversation seam: what the agent loop needs from storage, in the spirit of
openai-agents' `Session` — begin a turn, record a tool round, record the answer, read more
history. `Conversation` is the protocol; `SqlConversation` implements it once with
SQLAlchemy, for SQLite and PostgreSQL alike.

Each call is one unit of work in ONE transaction. The hot statements are Core on the
session's connection (the ORM's unit of work costs more than the statement itself); the
ORM is used only on rare paths (a new user). Writes another part of the app makes with a
record (a model call's usage row) come in as `also`, run inside the same transaction.

On SQLite the units of work queue for one another in the event loop: SQLite takes one
writer at a time anyway, and a writer left to SQLite's busy handler sleeps in growing
back-off steps long after the lock is free, which with many chats at once bounds how many
messages a second the bot answers. Other writers (memory, the scheduler) still meet these
in SQLite's busy handler, as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol, cast

from sqlalchemy import Table, insert, update
from sqlalchemy.ext.asyncio import AsyncSession

from db.engine import SessionFactory, is_postgres
from db.models.core import ToolCallRecord, User
from db.repos import core as repo
from db.repos import sessions as sessions_repo

log = logging.getLogger(__name__)

HISTORY_ROWS = 64  # newest history rows read with the user's message
AUDIT_LIMIT = 4_000  # characters of a tool call's arguments and result kept in the audit table

# Writes that belong in a record's transaction (a model call's usage row).
AlsoWrite = Callable[[AsyncSession], Awaitable[None]]
# Whether a session that started at `started` (aware UTC) has had its period end, for a
# user in time zone `tz_name` (SESSION_SPLIT).
PeriodOver = Callable[[datetime, "str | None"], bool]

_TOOL_CALLS = cast(Table, ToolCallRecord.__table__)
_ADD_TOOL_CALL = insert(_TOOL_CALLS)


@dataclass(frozen=True)
class TurnUser:
    """What a request needs of its user row (metering's UsageUser included)."""

    id: int
    telegram_id: int | None
    name: str
    timezone: str | None
    llm_model: str | None
    usage_footer: bool
    usage_warned: str | None


@dataclass(frozen=True)
class Started:
    """A turn begun: the user, their open session, whether they have memories, the stored
    message's id and the session's newest HISTORY_ROWS rows, oldest first."""

    user: TurnUser
    session_id: int
    has_memories: bool
    message_id: int
    history: Sequence[repo.HistoryRow]


@dataclass(frozen=True)
class Turn:
    """Where a request's records go."""

    session_id: int
    user_id: int
    request_id: str


@dataclass(frozen=True)
class ToolResult:
    """One tool call of a round and what it returned."""

    call_id: str
    name: str
    arguments: str
    text: str
    ok: bool
    error: str | None
    duration_ms: float


class Conversation(Protocol):
    async def begin_turn(
        self,
        *,
        telegram_id: int | None,
        user_name: str,
        text: str,
        kind: str,
        telegram_message_id: int | None,
        request_id: str,
        now: datetime,
        period_over: PeriodOver,
    ) -> Started:
        """Find (or make) the user and their current session, store their message and
        read the session's newest history."""
        ...

    async def record_tool_round(
        self,
        turn: Turn,
        now: datetime,
        content: str,
        wire_calls: list[dict[str, Any]],
        results: Sequence[ToolResult],
        also: AlsoWrite | None = None,
    ) -> None:
        """The assistant's message with its calls, each result, each call's audit row."""
        ...

    async def record_answer(
        self, turn: Turn, now: datetime, answer: str, also: AlsoWrite | None = None
    ) -> None: ...

    async def history(self, session_id: int, limit: int) -> Sequence[repo.HistoryRow]:
        """The session's newest `limit` rows, oldest first."""
        ...


@dataclass
class SqlConversation:
    session_factory: SessionFactory
    _writing: asyncio.Lock = field(default_factory=asyncio.Lock, init=False, repr=False)

    @contextlib.asynccontextmanager
    async def _unit(self) -> AsyncIterator[AsyncSession]:
        """A session in one transaction; on SQLite, after the units of work before it."""
        async with self.session_factory() as s:
            queue = contextlib.nullcontext() if is_postgres(s) else self._writing
            async with queue, s.begin():
                yield s

    async def begin_turn(
        self,
        *,
        telegram_id: int | None,
        user_name: str,
        text: str,
        kind: str,
        telegram_message_id: int | None,
        request_id: str,
        now: datetime,
        period_over: PeriodOver,
    ) -> Started:
        async with self._unit() as s:
            conn = await s.connection()
            read = repo.LOCAL_START_READ if telegram_id is None else repo.START_READ
            row = (await conn.execute(read, {"telegram_id": telegram_id})).first()
            if row is None:  # a new user: the ORM, once
                u = await repo.get_or_create_user(s, telegram_id, user_name, now)
                user = TurnUser(
                    u.id, telegram_id, u.name, u.timezone, u.llm_model, False, u.usage_warned
                )
                tz_name, session_id, started, has_memories = u.timezone, None, None, False
            else:
                uid, name, tz_name, model, footer, warned, session_id, started, has = row
                if user_name and name != user_name:
                    await conn.execute(update(User).where(User.id == uid).values(name=user_name))
                    name = user_name
                user = TurnUser(uid, telegram_id, name, tz_name, model, bool(footer), warned)
                has_memories = bool(has)
            # A message after the split time opens a new session even if the scheduler has
            # not archived the old one yet (it writes the old one's summary).
            if session_id is not None and started is not None and period_over(started, tz_name):
                await sessions_repo.close_session(s, session_id, now)
                log.info(
                    "session %d: its period ended; the new message opens a new one", session_id
                )
                session_id = None
            if session_id is None:
                session_id = (await repo.create_session(s, user.id, None, now)).id
            message_id = await repo.add_message(
                conn,
                session_id=session_id,
                user_id=user.id,
                role="user",
                content=text,
                request_id=request_id,
                now=now,
                telegram_message_id=telegram_message_id,
                kind=kind,
            )
            rows = await repo.history_rows(conn, session_id, HISTORY_ROWS)
        return Started(user, session_id, has_memories, message_id, rows)

    async def record_tool_round(
        self,
        turn: Turn,
        now: datetime,
        content: str,
        wire_calls: list[dict[str, Any]],
        results: Sequence[ToolResult],
        also: AlsoWrite | None = None,
    ) -> None:
        async with self._unit() as s:
            conn = await s.connection()
            await repo.add_message(
                conn,
                session_id=turn.session_id,
                user_id=turn.user_id,
                role="assistant",
                content=content,
                request_id=turn.request_id,
                now=now,
                tool_calls=json.dumps(wire_calls),
            )
            if results:
                await conn.execute(
                    repo.ADD_MESSAGES,
                    [
                        repo.message_params(
                            {
                                "session_id": turn.session_id,
                                "user_id": turn.user_id,
                                "role": "tool",
                                "content": r.text,
                                "request_id": turn.request_id,
                                "now": now,
                                "tool_call_id": r.call_id,
                                "tool_name": r.name,
                            }
                        )
                        for r in results
                    ],
                )
                await conn.execute(
                    _ADD_TOOL_CALL,
                    [
                        {
                            "session_id": turn.session_id,
                            "user_id": turn.user_id,
                            "request_id": turn.request_id,
                            "tool_call_id": r.call_id,
                            "tool": r.name,
                            "arguments": r.arguments[:AUDIT_LIMIT],
                            "result": r.text[:AUDIT_LIMIT],
                            "ok": r.ok,
                            "error": r.error,
                            "duration_ms": r.duration_ms,
                            "created_at": now,
                        }
                        for r in results
                    ],
                )
            if also is not None:
                await also(s)

    async def record_answer(
        self, turn: Turn, now: datetime, answer: str, also: AlsoWrite | None = None
    ) -> None:
        async with self._unit() as s:
            if also is not None:
                await also(s)
            await repo.add_message(
                await s.connection(),
                session_id=turn.session_id,
                user_id=turn.user_id,
                role="assistant",
                content=answer,
                request_id=turn.request_id,
                now=now,
            )

    async def history(self, session_id: int, limit: int) -> Sequence[repo.HistoryRow]:
        async with self.session_factory() as s:
            return await repo.history_rows(s, session_id, limit)
