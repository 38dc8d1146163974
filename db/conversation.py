"""The conversation seam: what the agent loop needs from storage, in the spirit of
openai-agents' `Session` — begin a turn, record a tool round, record the answer, read more
history. `Conversation` is the protocol; `SqlConversation` implements it once with
SQLAlchemy Core, for SQLite and PostgreSQL alike.

Each call is one unit of work in ONE transaction, written once as a plain function over a
synchronous SQLAlchemy Connection and run
- on PostgreSQL through the async engine (`AsyncConnection.run_sync`: the same statements
  on asyncpg);
- on a SQLite file right on the event loop's thread, with a synchronous engine on the same
  database. Through the async driver every statement is several hand-offs to the driver's
  thread and back (open a cursor, execute, fetch, close), each waiting for the GIL while
  the loop is busy, and those were most of a message's cost; SQLite answers these few
  indexed statements on a local file faster than one hand-off. The loop never waits for a
  lock: the connection has no busy timeout, and a unit that finds the database locked is
  rolled back and tried again after an asynchronous pause.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, TypeVar, cast

from sqlalchemy import Table, insert, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import OperationalError

from db.engine import BUSY_TIMEOUT_S, SessionFactory, engine_of, sqlite_file, sync_sqlite_engine
from db.models.core import ChatSession, ToolCallRecord, User
from db.repos import core as repo
from db.repos import usage as usage_repo

log = logging.getLogger(__name__)

HISTORY_ROWS = 64  # newest history rows read with the user's message
AUDIT_LIMIT = 4_000  # characters of a call's arguments and result kept in the audit table

# Whether a session that started at `started` (aware UTC) has had its period end, for a
# user in time zone `tz_name` (SESSION_SPLIT).
PeriodOver = Callable[[datetime, "str | None"], bool]
_T = TypeVar("_T")

_ADD_TOOL_CALL = insert(cast(Table, ToolCallRecord.__table__))
_ADD_USER = insert(User).returning(User.id)
_ADD_SESSION = insert(ChatSession).returning(ChatSession.id)


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
    voice_mode: str | None = None  # /voice: None when never set (the default applies)


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


@dataclass(frozen=True)
class UsageWrites:
    """Model calls' usage rows (usage.add_usage's keywords) to write with a record, and the
    user's new usage_warned (None: unchanged)."""

    rows: Sequence[dict[str, Any]] = ()
    warned: str | None = None


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
        usage: UsageWrites | None = None,
    ) -> None:
        """The assistant's message with its calls, each result, each call's audit row."""
        ...

    async def record_answer(
        self, turn: Turn, now: datetime, answer: str, usage: UsageWrites | None = None
    ) -> None: ...

    async def history(self, session_id: int, limit: int) -> Sequence[repo.HistoryRow]:
        """The session's newest `limit` rows, oldest first."""
        ...

    def close(self) -> None: ...


class SqlConversation:
    def __init__(self, session_factory: SessionFactory) -> None:
        self._engine = engine_of(session_factory)
        path = sqlite_file(self._engine)
        self._sync = sync_sqlite_engine(path, busy_timeout_ms=0) if path is not None else None

    async def _run(self, unit: Callable[[Connection], _T]) -> _T:
        """`unit` in one transaction: on the SQLite file directly, or on the async engine."""
        if self._sync is None:
            async with self._engine.begin() as conn:
                return await conn.run_sync(unit)
        # A write lock held elsewhere is waited for here, in the event loop (the connection
        # has no busy timeout of its own): the whole unit is rolled back and tried again.
        deadline = asyncio.get_running_loop().time() + BUSY_TIMEOUT_S
        pause = 0.001
        while True:
            try:
                with self._sync.begin() as conn:
                    return unit(conn)
            except OperationalError as exc:
                busy = getattr(exc.orig, "sqlite_errorname", "") in ("SQLITE_BUSY", "SQLITE_LOCKED")
                if not busy or asyncio.get_running_loop().time() > deadline:
                    raise
            await asyncio.sleep(pause)
            pause = min(pause * 2, 0.02)

    def close(self) -> None:
        if self._sync is not None:
            self._sync.dispose()

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
        def unit(c: Connection) -> Started:
            read = repo.LOCAL_START_READ if telegram_id is None else repo.START_READ
            row = c.execute(read, {"telegram_id": telegram_id}).first()
            if row is None:
                values = {"telegram_id": telegram_id, "name": user_name, "created_at": now}
                uid = c.execute(_ADD_USER, values).scalar_one()
                user = TurnUser(uid, telegram_id, user_name, None, None, False, None)
                session_id, started, has_memories = None, None, False
            else:
                uid, name, tz_name, model, footer, warned, session_id, started, voice, has = row
                if user_name and name != user_name:
                    c.execute(update(User).where(User.id == uid).values(name=user_name))
                    name = user_name
                user = TurnUser(uid, telegram_id, name, tz_name, model, bool(footer), warned, voice)
                has_memories = bool(has)
            # A message after the split time opens a new session even if the scheduler has
            # not archived the old one yet (it writes the old one's summary).
            if session_id is not None and period_over(cast(datetime, started), user.timezone):
                c.execute(
                    update(ChatSession)
                    .where(ChatSession.id == session_id, ChatSession.ended_at.is_(None))
                    .values(ended_at=now)
                )
                log.info("session %d: its period ended; this message opens a new one", session_id)
                session_id = None
            if session_id is None:
                name = repo.default_session_name(now)
                new = {"user_id": user.id, "name": name, "started_at": now}
                session_id = c.execute(_ADD_SESSION, new).scalar_one()
            message: repo.MessageFields = {
                "session_id": session_id,
                "user_id": user.id,
                "role": "user",
                "content": text,
                "request_id": request_id,
                "now": now,
                "telegram_message_id": telegram_message_id,
                "kind": kind,
            }
            message_id = c.execute(repo.ADD_MESSAGE, repo.message_params(message)).scalar_one()
            return Started(user, session_id, has_memories, message_id, _history(c, session_id))

        return await self._run(unit)

    async def record_tool_round(
        self,
        turn: Turn,
        now: datetime,
        content: str,
        wire_calls: list[dict[str, Any]],
        results: Sequence[ToolResult],
        usage: UsageWrites | None = None,
    ) -> None:
        def message(
            role: str, content: str, calls: str | None = None, result: ToolResult | None = None
        ) -> dict[str, Any]:
            return repo.message_params(
                {
                    "session_id": turn.session_id,
                    "user_id": turn.user_id,
                    "role": role,
                    "content": content,
                    "request_id": turn.request_id,
                    "now": now,
                    "tool_calls": calls,
                    "tool_call_id": result.call_id if result else None,
                    "tool_name": result.name if result else None,
                }
            )

        def unit(c: Connection) -> None:
            rows = [message("assistant", content, calls=json.dumps(wire_calls))]
            rows += [message("tool", r.text, result=r) for r in results]
            c.execute(repo.ADD_MESSAGES, rows)
            if results:
                audit = [
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
                ]
                c.execute(_ADD_TOOL_CALL, audit)
            _usage(c, turn, usage)

        await self._run(unit)

    async def record_answer(
        self, turn: Turn, now: datetime, answer: str, usage: UsageWrites | None = None
    ) -> None:
        message: repo.MessageFields = {
            "session_id": turn.session_id,
            "user_id": turn.user_id,
            "role": "assistant",
            "content": answer,
            "request_id": turn.request_id,
            "now": now,
        }

        def unit(c: Connection) -> None:
            _usage(c, turn, usage)
            c.execute(repo.ADD_MESSAGES, repo.message_params(message))

        await self._run(unit)

    async def history(self, session_id: int, limit: int) -> Sequence[repo.HistoryRow]:
        return await self._run(lambda c: _history(c, session_id, limit))


def _history(c: Connection, session_id: int, limit: int = HISTORY_ROWS) -> list[Any]:
    rows = list(c.execute(repo.HISTORY, {"session_id": session_id, "limit": limit}).all())
    rows.reverse()
    return rows


def _usage(c: Connection, turn: Turn, usage: UsageWrites | None) -> None:
    if usage is None:
        return
    if usage.rows:
        c.execute(usage_repo.INSERT, list(usage.rows))
    if usage.warned is not None:
        c.execute(update(User).where(User.id == turn.user_id).values(usage_warned=usage.warned))
