"""A message's hot-path writes as the last statements of their transaction, with the COMMIT
in the same trip to SQLite's thread.

Each statement through SQLAlchemy is one trip to aiosqlite's thread (db/sqlite_adapter.py),
and so is the commit: storing the user's message, reading the history and committing were
three, storing the answer and committing two. On SQLite these functions run the same
statements (compiled once from the Core objects in db/repos/core.py, so the SQL and the
stored values are SQLAlchemy's own: the dialect's bind processors, not sqlite3's adapters)
and the COMMIT in one trip; the caller's `s.begin()` then finds no transaction open and its
commit costs nothing. On PostgreSQL they are the
plain statements and the caller's commit does the rest.

Anything the ORM session still holds (a renamed user) is flushed first, so it lands in the
same transaction as before.

The answer's write carries the request's model_usage rows (add_message_commit's usage_rows)
in the same trip. Paths that need no ORM pass a bare AsyncConnection instead of a session:
about half the CPU to set up and close.

start_request_commit goes one further for a message from a known user in a current
session (nearly every message): the user and open-session read joins the same trip, so a
plain message costs two trips (its start, its answer) instead of three.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple, TypeAlias, Unpack

from sqlalchemy import Table
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from db.repos import core as repo
from db.repos import usage as usage_repo
from db.sqlite_adapter import OneHopConnection, write_in_driver


class HistoryTuple(NamedTuple):
    """A history row read in the driver's thread: the columns of repo.history_rows."""

    id: int
    role: str
    content: str
    tool_calls: str | None
    tool_call_id: str | None


# What history reads give: SQLAlchemy rows, or these when read in the driver's thread.
AnyHistoryRow: TypeAlias = "repo.HistoryRow | HistoryTuple"


# (key, bind processor or None) for each of a compiled statement's parameters, in order
Binds = tuple[tuple[str, Callable[[Any], Any] | None], ...]


@dataclass(frozen=True)
class _Compiled:
    insert_sql: str
    # (key, bind processor or None) in the INSERT's parameter order
    insert_params: Binds
    history_sql: str
    history_keys: tuple[str, ...]
    history_fixed: dict[str, Any]  # the statement's own constant parameters (OFFSET 0)


_compiled: _Compiled | None = None


def _binds(table: Table, order: Sequence[str], dialect: Dialect) -> Binds:
    """The dialect's own bind processors (not sqlite3's adapters), as SQLAlchemy applies them."""
    return tuple((k, table.c[k].type.dialect_impl(dialect).bind_processor(dialect)) for k in order)


def _bound(binds: Binds, values: dict[str, Any]) -> list[Any]:
    return [values[k] if p is None else p(values[k]) for k, p in binds]


def _compile(dialect: Dialect, fields: dict[str, Any]) -> _Compiled:
    # Every message_params dict has the same keys (all the INSERT's columns).
    global _compiled
    if _compiled is None:
        ins = repo._ADD_MESSAGE.compile(dialect=dialect, column_keys=list(fields))
        processors = _binds(repo._MESSAGES, ins.positiontup or [], dialect)
        hist = repo._HISTORY.compile(dialect=dialect)
        keys = tuple(hist.positiontup or [])
        fixed = {
            k: v
            for k, v in hist.construct_params({"session_id": 0, "limit": 0}).items()
            if k not in ("session_id", "limit")
        }
        _compiled = _Compiled(str(ins), processors, str(hist), keys, fixed)
    return _compiled


def _fetch(db: Any, sql: str, args: list[Any]) -> list[Any]:
    # Every row fetched and the cursor closed: an INSERT ... RETURNING is complete only
    # once stepped to its end, and a COMMIT must find no statement still running.
    cur = db.cursor()
    try:
        return list(cur.execute(sql, args).fetchall())
    finally:
        cur.close()


def _insert(db: Any, c: _Compiled, fields: dict[str, Any]) -> int:
    return int(_fetch(db, c.insert_sql, _bound(c.insert_params, fields))[0][0])


def _history(db: Any, c: _Compiled, session_id: int, limit: int) -> list[HistoryTuple]:
    """The session's newest `limit` rows (repo.history_rows), oldest first."""
    values = {**c.history_fixed, "session_id": session_id, "limit": limit}
    rows = [
        HistoryTuple(*r) for r in _fetch(db, c.history_sql, [values[k] for k in c.history_keys])
    ]
    rows.reverse()
    return rows


async def _one_hop(s: AsyncSession | AsyncConnection) -> AsyncConnection | None:
    """The session's connection (or the connection itself) when it is our SQLite adapter's
    (None on PostgreSQL), with the ORM's pending changes flushed."""
    if isinstance(s, AsyncConnection):
        conn = s
    else:
        if s.new or s.dirty or s.deleted:
            await s.flush()
        conn = await s.connection()
    if conn.dialect.name != "sqlite":
        return None
    raw = await conn.get_raw_connection()
    if not isinstance(raw.dbapi_connection, OneHopConnection):
        return None
    return conn


async def add_message_history_commit(
    s: AsyncSession, *, history_limit: int, **message: Unpack[repo.MessageFields]
) -> tuple[int, Sequence[AnyHistoryRow]]:
    """Store the message (repo.add_message's keywords), then read the newest
    `history_limit` rows of its session (repo.history_rows), ending the transaction: on
    SQLite committed in the same trip."""
    conn = await _one_hop(s)
    if conn is None:
        message_id = await repo.add_message(s, **message)
        return message_id, await repo.history_rows(s, message["session_id"], history_limit)
    fields = repo.message_params(message)
    c = _compile(conn.dialect, fields)

    def run(db: Any) -> tuple[int, list[HistoryTuple]]:
        message_id = _insert(db, c, fields)
        rows = _history(db, c, fields["session_id"], history_limit)
        db.commit()
        return message_id, rows

    return await write_in_driver(conn, run)


async def add_message_commit(
    s: AsyncSession | AsyncConnection,
    *,
    usage_rows: Sequence[dict[str, Any]] = (),
    **message: Unpack[repo.MessageFields],
) -> int:
    """Store the message (repo.add_message's keywords), after `usage_rows` (model_usage rows,
    usage.add_usage's keywords), as the transaction's last statements: on SQLite the
    INSERTs and the COMMIT in one trip. `s` may be a bare connection (lighter than a
    session); on PostgreSQL the caller's commit (session or `conn.commit()`) ends it."""
    conn = await _one_hop(s)
    usage_batch = _usage_batch(conn, usage_rows) if conn is not None else None
    if conn is None or usage_batch is None:
        # PostgreSQL, or usage rows this path does not compile: statement by statement.
        for row in usage_rows:
            await usage_repo.insert_usage(s, row)
        return await repo.add_message(s, **message)
    fields = repo.message_params(message)
    c = _compile(conn.dialect, fields)
    usage_sql, usage_args = usage_batch

    def run(db: Any) -> int:
        if usage_args:
            db.executemany(usage_sql, usage_args)
        message_id = _insert(db, c, fields)
        db.commit()
        return message_id

    return await write_in_driver(conn, run)


_usage_inserts: dict[tuple[str, ...], tuple[str, Binds]] = {}


def _usage_batch(
    conn: AsyncConnection, rows: Sequence[dict[str, Any]]
) -> tuple[str, list[list[Any]]] | None:
    """The model_usage INSERT compiled for `rows` (all with the same keys, every column
    given, as Meter.record writes them) and each row's bound values; None when the rows
    are not of that shape (left to SQLAlchemy, which fills column defaults)."""
    if not rows:
        return "", []
    keys = tuple(rows[0])
    if any(tuple(r) != keys for r in rows):
        return None
    compiled = _usage_inserts.get(keys)
    if compiled is None:
        ins = usage_repo.INSERT.compile(dialect=conn.dialect, column_keys=list(keys))
        order = tuple(ins.positiontup or [])
        if not set(order) <= set(keys):  # a column default to compute: not this path
            return None
        compiled = _usage_inserts[keys] = (str(ins), _binds(usage_repo.TABLE, order, conn.dialect))
    sql, binds = compiled
    return sql, [_bound(binds, r) for r in rows]


@dataclass(frozen=True)
class _StartRead:
    sql: str
    keys: tuple[str, ...]
    fixed: dict[str, Any]  # the statement's own constant parameters (LIMIT 1)
    # per selected column: the type's result processor or None
    processors: tuple[Callable[[Any], Any] | None, ...]


_start_reads: dict[bool, _StartRead] = {}


def _compile_start(dialect: Dialect, local: bool) -> _StartRead:
    read = _start_reads.get(local)
    if read is None:
        stmt = repo.LOCAL_START_READ if local else repo.START_READ
        comp = stmt.compile(dialect=dialect)
        keys = tuple(comp.positiontup or [])
        fixed = {k: v for k, v in comp.construct_params({"telegram_id": 0}).items()}
        fixed.pop("telegram_id", None)
        processors = tuple(
            col.type.dialect_impl(dialect).result_processor(dialect, None)
            for col in stmt.selected_columns
        )
        read = _start_reads[local] = _StartRead(str(comp), keys, fixed, processors)
    return read


class StartUser(NamedTuple):
    """What a request needs of its user row (repo.START_COLUMNS): a plain tuple, since an
    ORM instance built by hand cost as much as the rest of the trip's Python side."""

    id: int
    telegram_id: int | None
    name: str
    timezone: str | None
    llm_model: str | None
    usage_footer: bool
    usage_warned: str | None


class Started(NamedTuple):
    """A request's start done in one trip: the user, the open session's id, whether the
    user has memories, the stored message's id and the session's newest history rows,
    oldest first."""

    user: StartUser
    session_id: int
    has_memories: bool
    message_id: int
    rows: list[HistoryTuple]


# Whether a session that started at `started` (aware UTC) has had its period end, for a
# user in time zone `tz_name`; bot/agent/sessions.period_ended's check.
PeriodEnded = Callable[[datetime, "str | None"], bool]


async def start_request_commit(
    s: AsyncSession | AsyncConnection,
    *,
    telegram_id: int | None,
    user_name: str,
    period_over: PeriodEnded,
    history_limit: int,
    **message: Unpack[repo.MessageFields],
) -> Started | None:
    """On SQLite, in one trip to the driver's thread: repo.request_start's read, then, when
    the user exists, keeps their name and has an open session whose period is not over,
    add_message_history_commit's statements into that session and the COMMIT. None (nothing
    written, no transaction left open) whenever the request needs more (a new user, a
    rename, a new session, a failing period check) and on PostgreSQL: the caller then takes
    the statement-by-statement path, which reads again. `message`'s session_id and user_id
    are replaced by the ones read."""
    conn = await _one_hop(s)
    if conn is None:
        return None
    read = _compile_start(conn.dialect, telegram_id is None)
    read_values = {**read.fixed, "telegram_id": telegram_id}
    read_args = [read_values[k] for k in read.keys]
    fields = repo.message_params(message)
    c = _compile(conn.dialect, fields)

    def run(db: Any) -> tuple[list[Any], int, list[HistoryTuple]] | None:
        found = _fetch(db, read.sql, read_args)
        if not found:
            return None
        row = [v if p is None else p(v) for v, p in zip(found[0], read.processors, strict=True)]
        user_id, name, tz_name, session_id, started = row[0], row[1], row[2], row[6], row[7]
        if session_id is None or (user_name and name != user_name):
            return None
        try:
            if period_over(started, tz_name):
                return None
        except Exception:  # the slow path checks again and logs it
            return None
        message_id = _insert(db, c, {**fields, "session_id": session_id, "user_id": user_id})
        rows = _history(db, c, session_id, history_limit)
        db.commit()
        return row, message_id, rows

    done = await write_in_driver(conn, run)
    if done is None:
        return None
    row, message_id, rows = done
    uid, name, tz_name, llm_model, footer, warned, session_id, _, has_memories = row
    user = StartUser(uid, telegram_id, name, tz_name, llm_model, bool(footer), warned)
    return Started(user, session_id, bool(has_memories), message_id, rows)
