"""The async engine: SQLite (the default) or PostgreSQL, picked by the URL.

SQLite goes through SQLAlchemy's own aiosqlite dialect and gets WAL, busy_timeout, foreign
keys and sqlite-vec on every connection. Each connection is made by the engine's
`async_creator` (SQLAlchemy's public hook for a driver connection of one's own): an
aiosqlite connection over the sqlite3 module that can load extensions. The stdlib sqlite3
of pyenv and python.org builds cannot; there it is pysqlite3 (the pysqlite3-binary wheel),
whose exceptions SQLAlchemy does not know as the driver's, so a `handle_error` listener
raises them as SQLAlchemy's own (IntegrityError and friends).

Concurrent writers wait in SQLite's busy handler (busy_timeout), on the driver's thread:
the driver's deferred transactions begin at the first write, so a transaction never holds
a read snapshot that a later write would have to upgrade (which SQLite refuses at once
instead of waiting).
"""

from __future__ import annotations

import sqlite3
import types
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite
import sqlite_vec
from sqlalchemy import event
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Connection, ExceptionContext, make_url
from sqlalchemy.ext.asyncio import (
    AsyncConnection,
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

SessionFactory = async_sessionmaker[AsyncSession]
_T = TypeVar("_T")
BUSY_TIMEOUT_S = 10  # how long a SQLite writer waits for the write lock before failing
# How long a session waits for a free pooled connection before failing (SQLAlchemy's own
# default, named so a test can shorten it; read when an engine is made).
POOL_TIMEOUT_S = 30.0
MMAP_BYTES = 256 * 1024 * 1024  # of a database file read through a memory map (the rest: read())


def sqlite_module() -> types.ModuleType:
    """The sqlite3 DB-API module that can load extensions: stdlib when it can, else pysqlite3."""
    if hasattr(sqlite3.Connection, "enable_load_extension"):
        return sqlite3
    try:
        import pysqlite3.dbapi2 as pysqlite3
    except ImportError as exc:  # pragma: no cover - depends on the platform
        raise RuntimeError(
            "this Python's sqlite3 cannot load extensions and pysqlite3 is not installed "
            "(pip install pysqlite3-binary)"
        ) from exc
    return pysqlite3  # type: ignore[no-any-return]


def configure_connection(conn: Any) -> None:
    """Pragmas and sqlite-vec for one raw DB-API connection (BUSY_TIMEOUT_S read now, so a
    test can shorten it)."""
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    conn.enable_load_extension(False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_S * 1000)}")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute("PRAGMA synchronous=NORMAL")
    # Reads map the file instead of copying each page in through read(): a memory recall's
    # vector search reads every vector of the user's (sqlite-vec has no index), megabytes a
    # message on a big store. Pages stay the operating system's cache, shared, not ours.
    conn.execute(f"PRAGMA mmap_size={MMAP_BYTES}")


class _Rows(list[Any]):
    """All the rows of a statement run on the driver's thread, with what its cursor says of
    it (SQLAlchemy reads those once the statement ran): what `execute_fetchall` of the
    connection hands back (_RawConnection), so a statement and its rows are one trip."""

    description: Any = None
    rowcount = -1
    lastrowid: int | None = None


def _raw_connection(module: types.ModuleType) -> type[Any]:
    """The driver's connection class whose `execute` gives a cursor whose `fetchall` keeps
    its cursor's description, row count and last row id with the rows (`_Rows`)."""

    class _RowsCursor(module.Cursor):  # type: ignore[name-defined,misc]
        def fetchall(self) -> _Rows:
            rows = _Rows(super().fetchall())
            rows.description, rows.rowcount = self.description, self.rowcount
            rows.lastrowid = self.lastrowid
            return rows

    class _RawConnection(module.Connection):  # type: ignore[name-defined,misc]
        def execute(self, sql: str, parameters: Any = ()) -> Any:
            return self.cursor(_RowsCursor).execute(sql, parameters)

    return _RawConnection


_RAW: dict[types.ModuleType, type[Any]] = {}


def _connect(path: str, module: types.ModuleType) -> Any:
    # The driver's default (deferred) transaction handling: it issues BEGIN before the
    # first write, so a SQLAlchemy transaction really commits or rolls back as one
    # (isolation_level=None would autocommit every statement). Starting at the first
    # write, not at a read, lets busy_timeout work when chats write at once.
    factory = _RAW.get(module) or _RAW.setdefault(module, _raw_connection(module))
    conn = module.connect(path, check_same_thread=False, factory=factory)
    configure_connection(conn)
    return conn


class _Cursor:
    """The cursor SQLAlchemy's aiosqlite adapter drives, on aiosqlite's public calls: a
    statement runs with its rows read to the end in one trip to the connection's thread
    (`execute_fetchall`, the rows coming back as `_Rows`; aiosqlite's own cursor makes a
    cursor first and fetches after: three trips a read, each two thread switches and tens
    of microseconds of CPU, a message runs about ten statements). SQLite has reset the
    statement then, so nothing is left open. SQLAlchemy reads every row of a result at once
    anyway, but for a streamed one (server-side cursor): that is held in memory here, which
    is why db/copy.py reads a table in pages."""

    # Until a statement runs (class defaults: one cursor a statement, nothing set per cursor).
    _rows: list[Any] = []  # noqa: RUF012 - never changed in place, only replaced
    description: Any = None
    rowcount = -1
    lastrowid: int | None = None
    arraysize = 1

    def __init__(self, conn: aiosqlite.Connection) -> None:
        self._conn = conn

    async def __aenter__(self) -> _Cursor:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def execute(self, sql: str, parameters: Any = None) -> _Cursor:
        rows = await self._conn.execute_fetchall(sql, () if parameters is None else parameters)
        assert isinstance(rows, _Rows), "a connection not made by _connect"
        self.description, self.rowcount, self.lastrowid = (
            rows.description,
            rows.rowcount,
            rows.lastrowid,
        )
        self._rows = rows
        return self

    async def executemany(self, sql: str, parameters: Any) -> _Cursor:
        cursor = await self._conn.executemany(sql, parameters)
        self.description, self.rowcount = cursor.description, cursor.rowcount
        self.lastrowid, self._rows = cursor.lastrowid, []
        return self

    async def fetchone(self) -> Any:
        rows = await self.fetchmany(1)
        return rows[0] if rows else None

    async def fetchmany(self, size: int | None = None) -> list[Any]:
        size = size or self.arraysize
        rows, self._rows = self._rows[:size], self._rows[size:]
        return rows

    async def fetchall(self) -> list[Any]:
        rows, self._rows = self._rows, []
        return rows

    async def close(self) -> None:
        self._rows = []


class _Connection(aiosqlite.Connection):
    """aiosqlite's connection (its thread, transactions, close) with a cursor of fewer trips
    to that thread."""

    def cursor(self) -> _Cursor:  # type: ignore[override]
        return _Cursor(self)

    # SQLAlchemy ends every transaction it began with the driver's commit or rollback, a
    # read's too; the driver's deferred mode opened none for a read, so there is nothing to
    # end and no trip to make (about one a message: the history's read).
    async def commit(self) -> None:
        if self.in_transaction:
            await super().commit()

    async def rollback(self) -> None:
        if self.in_transaction:
            await super().rollback()


async def _aiosqlite_connection(path: str, module: types.ModuleType) -> aiosqlite.Connection:
    # aiosqlite.connect() would open the stdlib module; its Connection takes any connector.
    return await _Connection(partial(_connect, path, module), iter_chunk_size=64)


def _wrap_foreign_errors(module: types.ModuleType) -> Callable[[ExceptionContext], Any]:
    """A `handle_error` listener that raises `module`'s driver errors as SQLAlchemy's own,
    as SQLAlchemy does for the stdlib sqlite3's (most specific class first)."""
    pairs: list[tuple[type[BaseException], type[sa_exc.DBAPIError]]] = [
        (module.IntegrityError, sa_exc.IntegrityError),
        (module.OperationalError, sa_exc.OperationalError),
        (module.ProgrammingError, sa_exc.ProgrammingError),
        (module.NotSupportedError, sa_exc.NotSupportedError),
        (module.DataError, sa_exc.DataError),
        (module.InternalError, sa_exc.InternalError),
        (module.InterfaceError, sa_exc.InterfaceError),
        (module.DatabaseError, sa_exc.DatabaseError),
        (module.Error, sa_exc.DBAPIError),
    ]

    def wrap(ctx: ExceptionContext) -> sa_exc.DBAPIError | None:
        orig = ctx.original_exception
        if ctx.sqlalchemy_exception is not None or not isinstance(orig, Exception):
            return None  # already SQLAlchemy's, or not the driver's
        for driver_class, ours in pairs:
            if isinstance(orig, driver_class):
                return ours(
                    ctx.statement, ctx.parameters, orig, connection_invalidated=ctx.is_disconnect
                )
        return None

    return wrap


# What SQLite says of a write lock held past BUSY_TIMEOUT_S.
_LOCKED = ("database is locked", "database is busy", "database table is locked")


def busy(exc: BaseException) -> bool:
    """Whether `exc` says the database is momentarily unavailable, the one test of it: a
    SQLite writer that waited BUSY_TIMEOUT_S for the write lock (the driver's error, or
    SQLAlchemy's wrapping it), or a session that waited POOL_TIMEOUT_S for a pooled
    connection while all were in use (PostgreSQL under load: SQLAlchemy's TimeoutError, which
    is no DBAPIError). Worth waiting out once, and named as busy (tools/errors.py, which
    asks it of what caused an error too)."""
    if isinstance(exc, sa_exc.TimeoutError):
        return True
    return type(exc).__name__ in ("OperationalError", "DatabaseError") and any(
        n in str(exc).lower() for n in _LOCKED
    )


# What a database that cannot serve a statement now raises, for the places that carry on
# without it (the inbox): its driver's errors as SQLAlchemy's, and the pool's timeout.
UNAVAILABLE: tuple[type[Exception], ...] = (sa_exc.DBAPIError, sa_exc.TimeoutError)


def postgres_url(url: str) -> str:
    """postgres://, postgresql:// and postgresql+<driver>:// as the asyncpg URL we connect with."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "postgresql":
        raise ValueError(f"not a PostgreSQL URL: {parsed.get_backend_name()!r}")
    return parsed.set(drivername="postgresql+asyncpg").render_as_string(hide_password=False)


def create_engine(url: str) -> AsyncEngine:
    """An AsyncEngine for a SQLite or PostgreSQL URL; a SQLite file's folder is created."""
    if url.startswith("postgres://"):
        url = "postgresql://" + url.removeprefix("postgres://")
    parsed = make_url(url)
    backend = parsed.get_backend_name()
    if backend == "postgresql":
        # pool_pre_ping: a worker outlives database restarts behind a load balancer.
        return create_async_engine(
            postgres_url(url), pool_pre_ping=True, pool_timeout=POOL_TIMEOUT_S
        )
    if backend != "sqlite":
        raise ValueError(f"only SQLite and PostgreSQL are supported, got {backend!r}")
    database = parsed.database or ":memory:"
    if database != ":memory:":
        Path(database).parent.mkdir(parents=True, exist_ok=True)
    module = sqlite_module()
    # The URL still names the file so SQLAlchemy picks the right pool (a queue pool for
    # files, a static one for :memory:); the connection itself comes from async_creator.
    # A file's queue pool: SQLAlchemy's default (5 kept, 10 more made and closed as needed)
    # opened a new connection for ~1 message in 4 of a burst (its thread, sqlite-vec loaded:
    # ~1 ms CPU); the same 15 at most, kept once made, the most recent first, its cache warm.
    pool = (
        {"pool_size": 15, "max_overflow": 0, "pool_use_lifo": True, "pool_timeout": POOL_TIMEOUT_S}
        if database != ":memory:"
        else {}
    )
    engine = create_async_engine(
        f"sqlite+aiosqlite:///{database}",
        async_creator=partial(_aiosqlite_connection, database, module),
        pool_reset_on_return=None,  # the "reset" handler below does it
        **pool,
    )
    event.listen(engine.sync_engine, "reset", _rollback_if_open)
    if module is not sqlite3:
        event.listen(engine.sync_engine, "handle_error", _wrap_foreign_errors(module))
    return engine


def _rollback_if_open(dbapi_connection: Any, record: Any, reset_state: Any) -> None:
    """A connection going back to the pool is rolled back only when a transaction is open
    (SQLAlchemy's documented custom reset scheme): the driver's deferred mode opens none
    for reads, and a rollback of nothing is still a trip to the driver's thread, paid by
    every read-only session."""
    if reset_state.terminate_only:
        return
    if dbapi_connection.driver_connection.in_transaction:
        dbapi_connection.rollback()


def session_factory(engine: AsyncEngine) -> SessionFactory:
    return async_sessionmaker(engine, expire_on_commit=False)


def is_postgres(bind: AsyncEngine | AsyncSession | Connection | AsyncConnection) -> bool:
    """Whether this engine, session or connection talks to PostgreSQL (else SQLite)."""
    if isinstance(bind, AsyncSession):
        engine = bind.bind
        assert engine is not None, "session not bound to an engine"
        return is_postgres(engine)
    return bind.dialect.name == "postgresql"


async def in_transaction(engine: AsyncEngine, unit: Callable[[Connection], _T]) -> _T:
    """`unit` in one transaction on a connection of `engine` (a conversation's records, the
    inbox's claims and done marks), its statements written as SQLAlchemy's plain (sync)
    Core. The whole unit runs in one greenlet (`run_sync`), the connection's return to the
    pool too: `AsyncConnection.execute`, begin and commit would each start a greenlet of
    their own and proxy its result, and `async with` closes the connection in a task of its
    own; CPU on the writes every message makes. The statements still run on the driver
    (aiosqlite's thread, asyncpg), as every other. A cancelled unit rolls back and returns
    its connection on its way out, as a `with` block does."""
    conn = await engine.connect()
    return await conn.run_sync(_in_transaction, unit)


def _in_transaction(conn: Connection, unit: Callable[[Connection], _T]) -> _T:
    with conn, conn.begin():
        return unit(conn)


def engine_of(factory: SessionFactory) -> AsyncEngine:
    """The engine a session factory binds."""
    engine = factory.kw["bind"]
    assert isinstance(engine, AsyncEngine), "session factory not bound to an engine"
    return engine
