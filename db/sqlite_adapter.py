"""SQLAlchemy's aiosqlite adapter with fewer trips to the driver's thread.

Every aiosqlite call is a hop to its worker thread and back through the event loop (a
queue put, a thread wake-up, a self-pipe write): SQLAlchemy's adapter makes four per
statement (open a cursor, execute, fetch all rows, close) and one per commit or rollback,
about thirty per chat message, and those hops were the largest single cost of a message's
database work. Here a statement is one hop (the whole cursor life runs in the thread), and
a commit or rollback with no transaction open is skipped: sqlite3 itself does nothing then
(it checks the same `in_transaction` flag), and reads under the driver's deferred mode
never open one, so every read-only session used to pay a hop for nothing.
"""

from __future__ import annotations

import collections
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from sqlalchemy.dialects.sqlite.aiosqlite import (
    AsyncAdapt_aiosqlite_connection,
    AsyncAdapt_aiosqlite_cursor,
    AsyncAdapt_aiosqlite_dbapi,
)
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.util import EMPTY_DICT
from sqlalchemy.util.concurrency import await_

_T = TypeVar("_T")

# (description, rowcount, lastrowid, rows or None)
_Outcome = tuple[Any, int, int | None, list[Any] | None]


def _run(conn: Any, operation: Any, parameters: Any, many: bool) -> _Outcome:
    """One statement's whole cursor life, in aiosqlite's thread."""
    cur = conn._conn.cursor()
    try:
        if many:
            cur.executemany(operation, parameters)
        elif parameters is None:
            cur.execute(operation)
        else:
            cur.execute(operation, parameters)
        description = cur.description
        rows = cur.fetchall() if description else None
        return description, cur.rowcount, cur.lastrowid, rows
    finally:
        cur.close()


class OneHopCursor(AsyncAdapt_aiosqlite_cursor):
    """A buffered cursor whose execute is one trip to the driver's thread."""

    __slots__ = ("_description", "_lastrowid", "_rowcount")

    def __init__(self, adapt_connection: AsyncAdapt_aiosqlite_connection) -> None:
        self._adapt_connection = adapt_connection
        self._connection = adapt_connection._connection
        self._cursor = None  # type: ignore[assignment]  # no driver cursor is kept open
        self._soft_closed_memoized = EMPTY_DICT
        self._rows = collections.deque()
        self._description: Any = None
        self._rowcount = -1
        self._lastrowid: int | None = None

    @property
    def description(self) -> Any:
        return self._description

    @property
    def rowcount(self) -> int:
        return self._rowcount

    @property
    def lastrowid(self) -> int:
        return self._lastrowid  # type: ignore[return-value]

    @property
    def arraysize(self) -> int:
        return 1

    @arraysize.setter
    def arraysize(self, value: int) -> None:
        pass

    async def _async_soft_close(self) -> None:
        return None  # the driver's cursor is closed already, the rows are buffered

    def close(self) -> None:
        self._rows.clear()

    def execute(self, operation: Any, parameters: Any = None) -> Any:
        try:
            return await_(self._run_async(operation, parameters, False))
        except Exception as error:
            self._adapt_connection._handle_exception(error)

    def executemany(self, operation: Any, seq_of_parameters: Sequence[Any]) -> Any:
        try:
            return await_(self._run_async(operation, seq_of_parameters, True))
        except Exception as error:
            self._adapt_connection._handle_exception(error)

    async def _run_async(self, operation: Any, parameters: Any, many: bool) -> None:
        conn: Any = self._connection
        async with self._adapt_connection._execute_mutex:
            out: _Outcome = await conn._execute(_run, conn, operation, parameters, many)
        self._description, self._rowcount, self._lastrowid, rows = out
        self._rows = collections.deque(rows) if rows is not None else collections.deque()

    def nextset(self) -> None:
        return None

    def setinputsizes(self, *inputsizes: Any) -> None:
        return None


class OneHopConnection(AsyncAdapt_aiosqlite_connection):
    __slots__ = ()

    _cursor_cls = OneHopCursor  # type: ignore[assignment]

    def _in_transaction(self) -> bool:
        raw = self._connection._connection
        return raw is not None and bool(raw.in_transaction)

    def rollback(self) -> None:
        if self._in_transaction():
            super().rollback()

    def commit(self) -> None:
        if self._in_transaction():
            super().commit()


class OneHopDBAPI(AsyncAdapt_aiosqlite_dbapi):
    def connect(self, *arg: Any, **kw: Any) -> OneHopConnection:
        # SQLAlchemy's own connect (its thread set-up included), rewrapped.
        return OneHopConnection(self, super().connect(*arg, **kw)._connection)


async def run_in_driver(conn: AsyncConnection, fn: Callable[[Any], _T]) -> _T:
    """`fn(raw sqlite3 connection)` in the driver's thread: several statements for the price
    of one hop (each statement through SQLAlchemy is one)."""
    raw = await conn.get_raw_connection()
    adapt: Any = raw.dbapi_connection
    async with adapt._execute_mutex:
        return await adapt._connection._execute(fn, adapt._connection._conn)  # type: ignore[no-any-return]
