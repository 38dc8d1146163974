"""The engine: real transactions, sqlite-vec loaded, pragmas on every connection (reads
through a memory map too), and SQLite writers of one engine that wait for each other
instead of failing."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from sqlalchemy import func, select, text
from sqlalchemy.ext.asyncio import AsyncEngine

from db.engine import MMAP_BYTES, create_engine, session_factory
from db.migrate import pending, upgrade
from db.models import ChatSession, User
from db.models.base import utcnow


async def test_a_failed_transaction_leaves_nothing_behind(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 't.db'}")
    try:
        await upgrade(engine)
        sf = session_factory(engine)
        with pytest.raises(RuntimeError):
            async with sf() as s, s.begin():
                user = User(telegram_id=1, name="a", created_at=utcnow())
                s.add(user)
                await s.flush()
                s.add(ChatSession(user_id=user.id, name="x", started_at=utcnow()))
                await s.flush()
                raise RuntimeError("crash mid-transaction")
        async with sf() as s:
            assert (await s.execute(select(func.count()).select_from(User))).scalar_one() == 0
            users = (await s.execute(select(func.count()).select_from(ChatSession))).scalar_one()
            assert users == 0
    finally:
        await engine.dispose()


async def test_connections_have_vec_wal_and_foreign_keys(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'sub' / 't.db'}")
    try:
        assert await pending(engine)  # a new file: every migration pending
        await upgrade(engine)
        assert await pending(engine) == []
        async with engine.connect() as conn:
            vec = (await conn.execute(text("select vec_version()"))).scalar_one()
            mode = (await conn.execute(text("pragma journal_mode"))).scalar_one()
            fks = (await conn.execute(text("pragma foreign_keys"))).scalar_one()
            mapped = (await conn.execute(text("pragma mmap_size"))).scalar_one()
        assert vec.startswith("v") and mode == "wal" and fks == 1
        assert mapped == MMAP_BYTES
    finally:
        await engine.dispose()


async def _users(sqlite_engine: AsyncEngine) -> list[int]:
    async with session_factory(sqlite_engine)() as s:
        ids = (await s.execute(select(User.telegram_id).order_by(User.id))).scalars()
        return [i for i in ids if i is not None]


async def test_a_second_writer_waits_for_the_first_transaction_to_end(
    sqlite_engine: AsyncEngine,
) -> None:
    sf = session_factory(sqlite_engine)
    first_wrote = asyncio.Event()
    release = asyncio.Event()

    async def first() -> None:
        async with sf() as s, s.begin():
            s.add(User(telegram_id=1, name="a", created_at=utcnow()))
            await s.flush()
            first_wrote.set()
            await release.wait()  # the write lock is held across other tasks' turns

    async def second() -> None:
        async with sf() as s, s.begin():
            s.add(User(telegram_id=2, name="b", created_at=utcnow()))

    t1 = asyncio.create_task(first())
    await first_wrote.wait()
    t2 = asyncio.create_task(second())
    await asyncio.sleep(0.05)
    assert not t2.done()  # waits in SQLite's busy handler for the open transaction
    release.set()
    await asyncio.gather(t1, t2)
    assert await _users(sqlite_engine) == [1, 2]


async def test_a_rolled_back_transaction_lets_the_next_writer_in(
    sqlite_engine: AsyncEngine,
) -> None:
    sf = session_factory(sqlite_engine)
    with pytest.raises(RuntimeError):
        async with sf() as s, s.begin():
            s.add(User(telegram_id=1, name="a", created_at=utcnow()))
            await s.flush()
            raise RuntimeError("crash mid-transaction")
    async with sf() as s, s.begin():
        s.add(User(telegram_id=2, name="b", created_at=utcnow()))
    assert await _users(sqlite_engine) == [2]


async def test_many_concurrent_writers_all_commit(sqlite_engine: AsyncEngine) -> None:
    sf = session_factory(sqlite_engine)

    async def write(i: int) -> None:
        async with sf() as s, s.begin():
            await s.execute(select(func.count()).select_from(User))
            s.add(User(telegram_id=i, name=str(i), created_at=utcnow()))
            await s.flush()
            await asyncio.sleep(0)
            await s.execute(text("select 1"))

    await asyncio.gather(*(write(i) for i in range(40)))
    assert sorted(await _users(sqlite_engine)) == list(range(40))


async def test_reads_do_not_wait_for_an_open_write(sqlite_engine: AsyncEngine) -> None:
    sf = session_factory(sqlite_engine)
    async with sf() as writer, writer.begin():
        writer.add(User(telegram_id=1, name="a", created_at=utcnow()))
        await writer.flush()
        async with asyncio.timeout(2):
            assert await _users(sqlite_engine) == []  # WAL: the reader sees the last commit


async def test_a_long_result_and_a_memory_database_read_whole(tmp_path: Path) -> None:
    """A statement is one trip to the driver's thread for its first rows (db/engine.py
    CHUNK): a longer result, read at once or streamed, still comes back whole; and the
    in-memory database (doctor's scratch schema) takes the engine too."""
    for url in (f"sqlite+aiosqlite:///{tmp_path / 'long.db'}", "sqlite+aiosqlite:///:memory:"):
        engine = create_engine(url)
        try:
            async with engine.begin() as c:
                await c.execute(text("CREATE TABLE t (x INTEGER)"))
                await c.execute(text("INSERT INTO t VALUES (:x)"), [{"x": i} for i in range(700)])
                got = (await c.execute(text("SELECT x FROM t ORDER BY x"))).scalars().all()
                assert got == list(range(700))
                streamed = await c.stream(text("SELECT x FROM t ORDER BY x"))
                assert [r[0] async for r in streamed] == list(range(700))
        finally:
            await engine.dispose()
