"""The conversation seam: what the agent loop needs from storage, in the spirit of
openai-agents' `Session` — begin a turn, record a tool round, record the answer, read more
history. `Conversation` does it with SQLAlchemy Core, for SQLite and PostgreSQL alike,
with the statements it writes messages and reads history with, built once.

Each record is one unit of work in ONE transaction on the app's async engine (aiosqlite or
asyncpg), so no database work runs on the event loop's thread. On SQLite a writer that
finds the write lock taken waits in SQLite's busy handler, on the driver's thread
(db/engine.py sets busy_timeout on every connection), and no retry loop is needed: the
driver opens the transaction (a deferred BEGIN) right before the unit's first write, so
that write is the transaction's first statement and SQLite waits for the lock there. A
deferred transaction that read first and wrote later would instead have to upgrade a read
snapshot, which SQLite refuses at once, without waiting. So a turn's start reads its user
and session outside the transaction (as it always did; one chat's messages are handled in
order) and its writes are the transaction.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NotRequired, TypeAlias, TypedDict, TypeVar, cast

from sqlalchemy import (
    BigInteger,
    Connection,
    Executable,
    Row,
    Table,
    bindparam,
    insert,
    select,
    update,
)

from db.engine import SessionFactory, engine_of, in_transaction
from db.models.core import SHOWN, ChatSession, Message, ToolCallRecord, User
from db.repos import core as repo
from db.repos import resume

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

# Every message starts with this read, built once: what a request needs of the user row
# and the open session's id and start, as plain columns (loading ORM objects costs more
# than the read). A feature reads its own rows in its own hooks.
START_COLUMNS = (
    User.id,
    User.name,
    User.timezone,
    ChatSession.id,
    ChatSession.started_at,
)
_CHAT = repo.in_chat(bindparam("chat_id", type_=BigInteger))
START_READ = repo.with_open_session(
    User.telegram_id == bindparam("telegram_id"), *START_COLUMNS, chat=_CHAT
)
LOCAL_START_READ = repo.with_open_session(User.telegram_id.is_(None), *START_COLUMNS, chat=_CHAT)
# The same by users.id: a turn a restart cut, continued (`unfinished`).
USER_READ = repo.with_open_session(User.id == bindparam("user_id"), *START_COLUMNS)


def chat_scope(telegram_id: int | None, chat_id: int | None) -> int | None:
    """The chat a session is held in: a group's id, or None for the user's own chat (their
    private chat, whose id is their own, or the terminal, which has none)."""
    return chat_id if chat_id is not None and chat_id != telegram_id else None


# Hot-path statements are built once, on the table (plain Core: the ORM entity form goes
# through the ORM's bulk-insert and loading machinery).
_MESSAGES = cast(Table, Message.__table__)
ADD_MESSAGE = insert(_MESSAGES).returning(_MESSAGES.c.id)
ADD_MESSAGES = insert(_MESSAGES)  # several at once (executemany), no ids back


class MessageFields(TypedDict):
    """One message row's values, as the message INSERT (message_params) takes them."""

    session_id: int
    user_id: int
    role: str
    content: str
    request_id: str
    now: datetime
    tool_calls: NotRequired[str | None]
    tool_call_id: NotRequired[str | None]
    tool_name: NotRequired[str | None]
    telegram_message_id: NotRequired[int | None]
    chat_id: NotRequired[int | None]
    kind: NotRequired[str]


def message_params(message: MessageFields) -> dict[str, Any]:
    """The bound values of the message INSERT (ADD_MESSAGE), every column given."""
    return {
        "session_id": message["session_id"],
        "user_id": message["user_id"],
        "role": message["role"],
        "content": message["content"],
        "request_id": message["request_id"],
        "tool_calls": message.get("tool_calls"),
        "tool_call_id": message.get("tool_call_id"),
        "tool_name": message.get("tool_name"),
        "telegram_message_id": message.get("telegram_message_id"),
        "chat_id": message.get("chat_id"),
        "kind": message.get("kind", "text"),
        "created_at": message["now"],
    }


# What the prompt needs of a history row (bot/agent/prompt.py), newest first.
HISTORY = (
    select(*SHOWN)
    .where(_MESSAGES.c.session_id == bindparam("session_id"))
    .order_by(_MESSAGES.c.id.desc())
    .limit(bindparam("limit"))
)
HistoryRow: TypeAlias = "Row[int, str, str, str | None, str | None, str | None, datetime]"


@dataclass(frozen=True)
class TurnUser:
    """What a request needs of its user row; a feature reads its own rows in its hooks."""

    id: int
    telegram_id: int | None
    name: str
    timezone: str | None


@dataclass(frozen=True)
class Started:
    """A turn begun: the user, their open session, the stored message's id and the
    session's newest HISTORY_ROWS rows, oldest first."""

    user: TurnUser
    session_id: int
    message_id: int
    history: Sequence[HistoryRow]


@dataclass(frozen=True)
class Unfinished(Started):
    """A turn a restart cut, as recorded: `history` ends with its last record (the user's
    message, then each tool round with its results), `tool_calls` says how many calls those
    rounds made (they count against the request's cap and are never run again)."""

    request_id: str
    text: str
    kind: str
    telegram_message_id: int | None
    tool_calls: int
    # The round whose writing calls were running when the turn was cut (the assistant
    # message with its calls), and those calls' ids.
    in_flight: dict[str, Any] | None = None
    started: frozenset[str] = frozenset()


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
    brief: str | None = None  # what the person may read of it (tools/base.py Tool.brief)


@dataclass(frozen=True)
class RecordWrite:
    """Rows a feature writes in the transaction of a record (a tool round or the answer):
    one statement and its parameter sets (the usage of the model calls since the previous
    record). db/ knows no feature's table, so the feature hands over its statement."""

    statement: Executable
    rows: Sequence[dict[str, Any]]


_KEEP_CONTEXT = (
    update(_MESSAGES)
    .where(_MESSAGES.c.id == bindparam("message_id"))
    .values(context=bindparam("block"))
)


def kept_context(message_id: int, block: str) -> RecordWrite:
    """The context block a user turn was first sent with (bot/agent/prompt.py with_context),
    kept with the turn's first record, so later requests send the turn unchanged."""
    return RecordWrite(_KEEP_CONTEXT, [{"message_id": message_id, "block": block}])


class Conversation:
    """Holds nothing of its own: the engine belongs to whoever built the session factory."""

    def __init__(self, session_factory: SessionFactory) -> None:
        self._engine = engine_of(session_factory)

    async def _run(self, unit: Callable[[Connection], _T]) -> _T:
        """`unit` in one transaction (in_transaction)."""
        return await in_transaction(self._engine, unit)

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
        chat_id: int | None = None,
    ) -> Started:
        """Find (or make) the user and their current session in the chat `chat_id` (a
        group's session is that group's; a private chat's or the terminal's is the user's
        own: chat_scope), store their message and read the session's newest
        history."""
        chat = chat_scope(telegram_id, chat_id)

        def unit(c: Connection) -> Started:
            read = LOCAL_START_READ if telegram_id is None else START_READ
            row = c.execute(read, {"telegram_id": telegram_id, "chat_id": chat}).first()
            if row is None:
                values = {"telegram_id": telegram_id, "name": user_name, "created_at": now}
                uid = c.execute(_ADD_USER, values).scalar_one()
                user = TurnUser(uid, telegram_id, user_name, None)
                session_id, started = None, None
            else:
                uid, name, tz_name, session_id, started = row
                if user_name and name != user_name:
                    c.execute(update(User).where(User.id == uid).values(name=user_name))
                    name = user_name
                user = TurnUser(uid, telegram_id, name, tz_name)
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
                new = {"user_id": user.id, "name": name, "started_at": now, "chat_id": chat}
                session_id = c.execute(_ADD_SESSION, new).scalar_one()
            message: MessageFields = {
                "session_id": session_id,
                "user_id": user.id,
                "role": "user",
                "content": text,
                "request_id": request_id,
                "now": now,
                "telegram_message_id": telegram_message_id,
                "chat_id": chat,
                "kind": kind,
            }
            message_id = c.execute(ADD_MESSAGE, message_params(message)).scalar_one()
            return Started(user, session_id, message_id, _history(c, session_id))

        return await self._run(unit)

    async def record_tool_round(
        self,
        turn: Turn,
        now: datetime,
        content: str,
        wire_calls: list[dict[str, Any]],
        results: Sequence[ToolResult],
        writes: Sequence[RecordWrite] = (),
    ) -> None:
        """The assistant's message with its calls, each result, each call's audit row."""

        def message(
            role: str, content: str, calls: str | None = None, result: ToolResult | None = None
        ) -> dict[str, Any]:
            return message_params(
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
            c.execute(ADD_MESSAGES, rows)
            c.execute(resume.LANDED, {"request_id": turn.request_id})
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
            _write(c, writes)

        await self._run(unit)

    async def record_answer(
        self, turn: Turn, now: datetime, answer: str, writes: Sequence[RecordWrite] = ()
    ) -> None:
        message: MessageFields = {
            "session_id": turn.session_id,
            "user_id": turn.user_id,
            "role": "assistant",
            "content": answer,
            "request_id": turn.request_id,
            "now": now,
        }

        def unit(c: Connection) -> None:
            _write(c, writes)
            c.execute(ADD_MESSAGES, message_params(message))

        await self._run(unit)

    async def record_in_flight(
        self, turn: Turn, now: datetime, message: dict[str, Any], call_id: str
    ) -> None:
        """A writing call of the round `message` (the assistant's, with its calls) starts;
        the round's record_tool_round ends that."""
        row = {"request_id": turn.request_id, "call_id": call_id,
               "message": json.dumps(message), "started_at": now}  # fmt: skip

        def unit(c: Connection) -> None:
            c.execute(resume.ADD_IN_FLIGHT, row)

        await self._run(unit)

    async def history(self, session_id: int, limit: int) -> Sequence[HistoryRow]:
        """The session's newest `limit` rows, oldest first."""
        async with self._engine.connect() as conn:
            return await conn.run_sync(_history, session_id, limit)

    async def unfinished(self, message_id: int) -> Unfinished | None:
        """The turn of this stored user message as recorded, to continue it; None when
        there is no such message (or its user is gone)."""
        async with self._engine.connect() as c:
            turn = (await c.execute(resume.TURN, {"message_id": message_id})).first()
            if turn is None:
                return None
            uid, telegram_id, session_id, request_id, text, kind, telegram_message_id = turn
            row = (await c.execute(USER_READ, {"user_id": uid})).first()
            if row is None:
                return None
            uid, name, tz_name, _, _ = row
            user = TurnUser(uid, telegram_id, name, tz_name)
            at = {"session_id": session_id, "request_id": request_id, "limit": HISTORY_ROWS}
            history = list((await c.execute(resume.HISTORY_UNTIL, at)).all())
            history.reverse()
            calls = (await c.execute(resume.TOOL_RESULTS, at)).scalar_one()
            flying = (await c.execute(resume.IN_FLIGHT, at)).all()
        return Unfinished(
            user, session_id, message_id, history,
            request_id, text, kind, telegram_message_id, int(calls),
            json.loads(flying[0].message) if flying else None,
            frozenset(row.call_id for row in flying),
        )  # fmt: skip


def _history(c: Connection, session_id: int, limit: int = HISTORY_ROWS) -> list[Any]:
    rows = list(c.execute(HISTORY, {"session_id": session_id, "limit": limit}).all())
    rows.reverse()
    return rows


def _write(c: Connection, writes: Sequence[RecordWrite]) -> None:
    for w in writes:
        if w.rows:
            c.execute(w.statement, list(w.rows))
