"""SQLAlchemy's aiosqlite adapter with fewer trips to the driver's thread.

Every aiosqlite call is a hop to its worker thread and back through the event loop (a
queue put, a thread wake-up, a self-pipe write): SQLAlchemy's adapter makes four per
statement (open a cursor, execute, fetch all rows, close) and one per commit or rollback,
about thirty per chat message, and those hops were the largest single cost of a message's
database work. Here a statement is one hop (the whole cursor life runs in the thread), and
a commit or rollback with no transaction open is skipped: sqlite3 itself does nothing then
(it checks the same `in_transaction` flag), and reads under the driver's deferred mode
never open one, so every read-only session used to pay a hop for nothing.

Writers also queue in the event loop (WriteGate) instead of in SQLite's busy handler: with
many chats at once, a connection that found the write lock taken slept in the handler's
back-off (1, 2, 5, 10 ... 100 ms) long after the lock was free, and those sleeps, not CPU,
bounded messages per second.
"""

from __future__ import annotations

import asyncio
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


class WriteGate:
    """One writing transaction at a time among an engine's connections, handed over first
    in, first out the moment the last one ends.

    SQLite itself still decides: a writer that waited `timeout` seconds here (a transaction
    held open elsewhere, another process) goes on to SQLite's own busy timeout, as it would
    without the gate, so a stuck holder slows writers down but never hangs them.
    """

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self._loop: asyncio.AbstractEventLoop | None = None
        self._lock = asyncio.Lock()
        self._holder: object | None = None

    async def enter(self, owner: object) -> None:
        if self._holder is owner:
            return
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # an engine outliving its loop (tests): start afresh
            self._loop, self._lock, self._holder = loop, asyncio.Lock(), None
        lock = self._lock
        if lock.locked():
            try:
                # A timeout scope, not wait_for: that wraps the wait in a new task, and with
                # many chats at once most writers wait here.
                async with asyncio.timeout(self.timeout):
                    await lock.acquire()
            except TimeoutError:
                return
        else:
            await lock.acquire()
        self._holder = owner

    def leave(self, owner: object) -> None:
        if self._holder is owner:
            self._holder = None
            self._lock.release()


def _may_write(operation: Any) -> bool:
    # Under the driver's deferred mode only a write opens a transaction; reads never wait.
    return not str(operation).lstrip()[:6].upper() == "SELECT"


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
        adapt: OneHopConnection = self._adapt_connection  # type: ignore[assignment]
        out: _Outcome = await adapt.in_driver(
            _run, self._connection, operation, parameters, many, write=_may_write(operation)
        )
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

    @property
    def gate(self) -> WriteGate:
        gate: WriteGate = self.dbapi.gate
        return gate

    def _leave_gate(self) -> None:
        if not self._in_transaction():
            self.gate.leave(self)

    async def in_driver(self, fn: Callable[..., _T], *args: Any, write: bool) -> _T:
        """`fn(*args)` in the driver's thread, one trip. A write outside a transaction enters
        the WriteGate first; the gate is left once no transaction is open (`fn` committed,
        failed, or wrote outside a transaction)."""
        if write and not self._in_transaction():
            await self.gate.enter(self)
        try:
            async with self._execute_mutex:
                return await self._connection._execute(fn, *args)  # type: ignore[no-any-return]
        finally:
            self._leave_gate()

    def rollback(self) -> None:
        try:
            if self._in_transaction():
                super().rollback()
        finally:
            self._leave_gate()

    def commit(self) -> None:
        try:
            if self._in_transaction():
                super().commit()
        finally:
            self._leave_gate()

    def close(self) -> None:
        try:
            super().close()
        finally:
            self.gate.leave(self)

    async def _terminate_graceful_close(self) -> None:
        try:
            await super()._terminate_graceful_close()
        finally:
            self.gate.leave(self)

    def _terminate_force_close(self) -> None:
        try:
            super()._terminate_force_close()
        finally:
            self.gate.leave(self)


class OneHopDBAPI(AsyncAdapt_aiosqlite_dbapi):
    def __init__(self, aiosqlite: Any, sqlite: Any, write_timeout: float = 10.0) -> None:
        super().__init__(aiosqlite, sqlite)
        self.gate = WriteGate(write_timeout)

    def connect(self, *arg: Any, **kw: Any) -> OneHopConnection:
        # SQLAlchemy's own connect (its thread set-up included), rewrapped.
        return OneHopConnection(self, super().connect(*arg, **kw)._connection)


async def run_in_driver(conn: AsyncConnection, fn: Callable[[Any], _T]) -> _T:
    """`fn(raw sqlite3 connection)` in the driver's thread: several statements for the price
    of one hop (each statement through SQLAlchemy is one)."""
    raw = await conn.get_raw_connection()
    adapt: OneHopConnection = raw.dbapi_connection  # type: ignore[assignment]
    return await adapt.in_driver(fn, adapt._connection._conn, write=False)


async def write_in_driver(conn: AsyncConnection, fn: Callable[[Any], _T]) -> _T:
    """run_in_driver for statements that write: the WriteGate is entered first, as a
    writing statement through the cursor would, and left once no transaction is open (`fn`
    may commit)."""
    raw = await conn.get_raw_connection()
    adapt: OneHopConnection = raw.dbapi_connection  # type: ignore[assignment]
    return await adapt.in_driver(fn, adapt._connection._conn, write=True)
