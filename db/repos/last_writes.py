"""A message's hot-path writes as the last statements of their transaction, with the COMMIT
in the same trip to SQLite's thread.

Each statement through SQLAlchemy is one trip to aiosqlite's thread (db/sqlite_adapter.py),
and so is the commit: storing the user's message, reading the history and committing were
three, storing the answer and committing two. On SQLite these functions run the same
statements (compiled once from the Core objects in db/repos/core.py, so the SQL and the
stored values are SQLAlchemy's own) and the COMMIT in one trip; the caller's `s.begin()`
then finds no transaction open and its commit costs nothing. On PostgreSQL they are the
plain statements and the caller's commit does the rest.

Anything the ORM session still holds (a renamed user) is flushed first, so it lands in the
same transaction as before.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, TypeAlias, Unpack

from sqlalchemy.engine import Dialect
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncSession

from db.repos import core as repo
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


@dataclass(frozen=True)
class _Compiled:
    insert_sql: str
    # (key, bind processor or None) in the INSERT's parameter order
    insert_params: tuple[tuple[str, Callable[[Any], Any] | None], ...]
    history_sql: str
    history_keys: tuple[str, ...]
    history_fixed: dict[str, Any]  # the statement's own constant parameters (OFFSET 0)


_compiled: _Compiled | None = None


def _compile(dialect: Dialect, fields: dict[str, Any]) -> _Compiled:
    # Every message_params dict has the same keys (all the INSERT's columns).
    global _compiled
    if _compiled is None:
        ins = repo._ADD_MESSAGE.compile(dialect=dialect, column_keys=list(fields))
        table = repo._MESSAGES
        order = ins.positiontup or []
        processors = tuple((k, table.c[k].type.bind_processor(dialect)) for k in order)
        hist = repo._HISTORY.compile(dialect=dialect)
        keys = tuple(hist.positiontup or [])
        fixed = {
            k: v
            for k, v in hist.construct_params({"session_id": 0, "limit": 0}).items()
            if k not in ("session_id", "limit")
        }
        _compiled = _Compiled(str(ins), processors, str(hist), keys, fixed)
    return _compiled


def _insert(db: Any, sql: str, args: list[Any]) -> int:
    # Every row fetched and the cursor closed: an INSERT ... RETURNING is complete only
    # once stepped to its end, and a COMMIT must find no statement still running.
    cur = db.cursor()
    try:
        return int(cur.execute(sql, args).fetchall()[0][0])
    finally:
        cur.close()


def _insert_args(c: _Compiled, fields: dict[str, Any]) -> list[Any]:
    return [fields[k] if p is None else p(fields[k]) for k, p in c.insert_params]


async def _one_hop(s: AsyncSession) -> AsyncConnection | None:
    """The session's connection when it is our SQLite adapter's
    (None on PostgreSQL), with the ORM's pending changes flushed."""
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
    args = _insert_args(c, fields)
    hist_values = {**c.history_fixed, "session_id": fields["session_id"], "limit": history_limit}
    hist_args = [hist_values[k] for k in c.history_keys]

    def run(db: Any) -> tuple[int, list[HistoryTuple]]:
        message_id = _insert(db, c.insert_sql, args)
        cur = db.cursor()
        try:
            rows = [HistoryTuple(*r) for r in cur.execute(c.history_sql, hist_args).fetchall()]
        finally:
            cur.close()
        db.commit()
        return message_id, rows

    message_id, rows = await write_in_driver(conn, run)
    rows.reverse()
    return message_id, rows


async def add_message_commit(s: AsyncSession, **message: Unpack[repo.MessageFields]) -> int:
    """Store the message (repo.add_message's keywords) as the transaction's last statement:
    on SQLite the INSERT and the COMMIT in one trip."""
    conn = await _one_hop(s)
    if conn is None:
        return await repo.add_message(s, **message)
    fields = repo.message_params(message)
    c = _compile(conn.dialect, fields)
    args = _insert_args(c, fields)

    def run(db: Any) -> int:
        message_id = _insert(db, c.insert_sql, args)
        db.commit()
        return message_id

    return await write_in_driver(conn, run)
