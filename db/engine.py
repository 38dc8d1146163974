"""The async engine: SQLite (the default) or PostgreSQL, picked by the URL.

SQLite goes through SQLAlchemy's own aiosqlite dialect and gets WAL, busy_timeout, foreign
keys and sqlite-vec on every connection. The stdlib sqlite3 of pyenv and python.org builds
cannot load extensions; there we connect through pysqlite3 (the pysqlite3-binary wheel) and
hand the dialect (its documented `module` argument) a DB-API built from pysqlite3's
exception classes, so IntegrityError and friends still map.

Concurrent writers wait in SQLite's busy handler (busy_timeout): the driver's deferred
transactions begin at the first write, so a transaction never holds a read snapshot that a
later write would have to upgrade (which SQLite refuses at once instead of waiting).
"""

from __future__ import annotations

import sqlite3
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiosqlite
import sqlite_vec
from sqlalchemy import create_engine as create_sync_engine
from sqlalchemy import event
from sqlalchemy.dialects.sqlite.aiosqlite import AsyncAdapt_aiosqlite_dbapi
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.ext.asyncio import (
    AsyncConnection,
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

SessionFactory = async_sessionmaker[AsyncSession]
BUSY_TIMEOUT_S = 10  # how long a SQLite writer waits for the write lock before failing


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


def configure_connection(conn: Any, busy_timeout_ms: int = BUSY_TIMEOUT_S * 1000) -> None:
    """Pragmas and sqlite-vec for one raw DB-API connection."""
    conn.enable_load_extension(True)
    conn.load_extension(sqlite_vec.loadable_path())
    conn.enable_load_extension(False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute("PRAGMA synchronous=NORMAL")


def _dbapi(module: types.ModuleType) -> AsyncAdapt_aiosqlite_dbapi:
    shim = types.ModuleType("aiosqlite_shim")
    shim.__dict__.update(vars(aiosqlite))
    for name in (
        "DatabaseError",
        "Error",
        "IntegrityError",
        "NotSupportedError",
        "OperationalError",
        "ProgrammingError",
        "sqlite_version",
        "sqlite_version_info",
        "Warning",
        "InterfaceError",
        "DataError",
        "InternalError",
    ):
        if hasattr(module, name):
            setattr(shim, name, getattr(module, name))
    return AsyncAdapt_aiosqlite_dbapi(shim, module)


def _connect(path: str, module: types.ModuleType, busy_timeout_ms: int | None = None) -> Any:
    # The driver's default (deferred) transaction handling: it issues BEGIN before the
    # first write, so a SQLAlchemy transaction really commits or rolls back as one
    # (isolation_level=None would autocommit every statement). Starting at the first
    # write, not at a read, lets busy_timeout work when chats write at once.
    conn = module.connect(path, check_same_thread=False)
    if busy_timeout_ms is None:
        configure_connection(conn)
    else:
        configure_connection(conn, busy_timeout_ms)
    return conn


def _creator(path: str, module: types.ModuleType) -> Callable[[], Any]:
    async def create() -> aiosqlite.Connection:
        conn = aiosqlite.Connection(lambda: _connect(path, module), iter_chunk_size=64)
        return await conn

    return create


def sqlite_file(engine: AsyncEngine) -> str | None:
    """The database file of a SQLite engine (None: PostgreSQL, or SQLite in memory)."""
    if engine.dialect.name != "sqlite":
        return None
    database = engine.url.database
    return None if not database or database == ":memory:" else database


def sync_sqlite_engine(path: str, busy_timeout_ms: int) -> Engine:
    """A synchronous engine on a SQLite file, with the same connection set-up, for short
    units of work run on the event loop's thread (db/conversation.py)."""
    module = sqlite_module()

    def connect() -> Any:
        return _connect(path, module, busy_timeout_ms)

    return create_sync_engine("sqlite://", creator=connect, module=module)


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
        return create_async_engine(postgres_url(url), pool_pre_ping=True)
    if backend != "sqlite":
        raise ValueError(f"only SQLite and PostgreSQL are supported, got {backend!r}")
    database = parsed.database or ":memory:"
    if database != ":memory:":
        Path(database).parent.mkdir(parents=True, exist_ok=True)
    module = sqlite_module()
    # The URL still names the file so SQLAlchemy picks the right pool (a queue pool for
    # files, a static one for :memory:); the connection itself comes from async_creator.
    engine = create_async_engine(
        f"sqlite+aiosqlite:///{database}",
        async_creator=_creator(database, module),
        module=_dbapi(module),
        pool_reset_on_return=None,  # the "reset" handler below does it
    )
    event.listen(engine.sync_engine, "reset", _rollback_if_open)
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


def engine_of(factory: SessionFactory) -> AsyncEngine:
    """The engine a session factory binds."""
    engine = factory.kw["bind"]
    assert isinstance(engine, AsyncEngine), "session factory not bound to an engine"
    return engine
