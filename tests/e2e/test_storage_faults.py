"""A database busy for longer than its timeout: a message not yet stored is kept and
answered once the lock is gone; when it stays busy the user hears what happened (not a
generic error) and the next message works without a restart. Every pooled connection in use
past the pool's wait (PostgreSQL under load) is a busy database too. Disk full and a
database gone are named the same way."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest
from sqlalchemy import exc as sa_exc
from sqlalchemy.ext.asyncio import AsyncConnection

from bot.telegram import answer
from db import engine
from tests.conftest import sqlite_only
from tests.e2e.conftest import OWNER, TG
from tools.errors import STORAGE_TEXT, public_text


class Seen(logging.Handler):
    def __init__(self, needle: str) -> None:
        super().__init__()
        self.needle = needle
        self.event = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.needle in record.getMessage():
            self.event.set()


@pytest.fixture
async def locked_tg(make_tg: Callable[..., Awaitable[TG]], monkeypatch: pytest.MonkeyPatch) -> TG:
    monkeypatch.setattr(engine, "BUSY_TIMEOUT_S", 1)  # the lock wait, short for the test
    monkeypatch.setattr(answer, "BUSY_WAIT_S", 0.5, raising=False)
    return await make_tg()


def lock(tg: TG) -> sqlite3.Connection:
    path = tg.app.engine.url.database
    assert path
    # Another writer, through the same SQLite library as the bot's (two copies of SQLite
    # in one process do not see each other's locks).
    other: sqlite3.Connection = engine.sqlite_module().connect(path, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    return other


@sqlite_only  # a SQLite file's lock; PostgreSQL locks rows
async def test_a_busy_database_is_waited_out_once_and_the_message_kept(locked_tg: TG) -> None:
    tg = locked_tg
    seen = Seen("database busy before the turn began")
    logging.getLogger("bot.telegram.answer").addHandler(seen)
    holder = lock(tg)
    try:
        await tg.send(OWNER, "kept through the lock")
        await asyncio.wait_for(seen.event.wait(), 60)
        holder.execute("COMMIT")  # the lock goes away while the bot waits
        assert (await tg.reply(OWNER, timeout=60)).text == "echo: kept through the lock"
    finally:
        logging.getLogger("bot.telegram.answer").removeHandler(seen)
        holder.close()


@sqlite_only
async def test_a_database_busy_for_long_says_so_and_recovers_by_itself(locked_tg: TG) -> None:
    tg = locked_tg
    holder = lock(tg)
    try:
        await tg.send(OWNER, "during the lock")
        assert (await tg.reply(OWNER, timeout=60)).text == STORAGE_TEXT["busy"]
    finally:
        holder.execute("COMMIT")
        holder.close()
    await tg.send(OWNER, "after the lock")
    assert (await tg.reply(OWNER, timeout=60)).text == "echo: after the lock"


@pytest.fixture
async def pool_tg(make_tg: Callable[..., Awaitable[TG]], monkeypatch: pytest.MonkeyPatch) -> TG:
    monkeypatch.setattr(engine, "POOL_TIMEOUT_S", 1.0)  # the pool's wait, short for the test
    monkeypatch.setattr(answer, "BUSY_WAIT_S", 1.0, raising=False)
    return await make_tg()


@asynccontextmanager
async def every_connection(tg: TG) -> AsyncIterator[None]:
    """Every connection of the app's pool checked out and held (as busy chats hold them on
    PostgreSQL under load), given back on leaving."""
    held: list[AsyncConnection] = []
    try:
        while True:
            try:
                held.append(await tg.app.engine.connect())
            except sa_exc.TimeoutError:
                break  # none left: the pool waited its POOL_TIMEOUT_S
        yield
    finally:
        for conn in held:
            await conn.close()


# Both backends: a SQLite file has a queue pool too; `make test-pg` runs these on PostgreSQL.
async def test_a_pool_without_a_free_connection_is_waited_out_once(pool_tg: TG) -> None:
    tg = pool_tg
    kept = Seen("handled without a copy")
    waited = Seen("database busy before the turn began")
    logging.getLogger("bot.telegram.middlewares").addHandler(kept)
    logging.getLogger("bot.telegram.answer").addHandler(waited)
    try:
        async with every_connection(tg):
            await tg.send(OWNER, "kept through the full pool")
            await asyncio.wait_for(kept.event.wait(), 60)
            await asyncio.wait_for(waited.event.wait(), 60)
        # The connections are back while the turn waits: its second try gets one.
        assert (await tg.reply(OWNER, timeout=60)).text == "echo: kept through the full pool"
    finally:
        logging.getLogger("bot.telegram.middlewares").removeHandler(kept)
        logging.getLogger("bot.telegram.answer").removeHandler(waited)


async def test_a_pool_full_for_long_says_the_database_is_busy_and_recovers(pool_tg: TG) -> None:
    tg = pool_tg
    async with every_connection(tg):
        await tg.send(OWNER, "during the full pool")
        assert (await tg.reply(OWNER, timeout=60)).text == STORAGE_TEXT["busy"]
    await tg.send(OWNER, "after the full pool")
    assert (await tg.reply(OWNER, timeout=60)).text == "echo: after the full pool"


@pytest.mark.parametrize(
    ("message", "problem"),
    [
        ("database is locked", "busy"),
        ("database or disk is full", "full"),
        ("disk I/O error", "full"),
        ("unable to open database file", "gone"),
        ("attempt to write a readonly database", "gone"),
    ],
)
def test_storage_failures_are_named(message: str, problem: str) -> None:
    exc = sa_exc.OperationalError("INSERT ...", {}, sqlite3.OperationalError(message))
    assert public_text(exc) == STORAGE_TEXT[problem]
    assert public_text(OSError(28, "No space left on device")) == STORAGE_TEXT["full"]


def test_a_pool_timeout_is_named_busy() -> None:
    # No pooled connection free in time: SQLAlchemy's own error, no driver's.
    pool = sa_exc.TimeoutError("QueuePool limit of size 5 overflow 10 reached")
    assert public_text(pool) == STORAGE_TEXT["busy"]
