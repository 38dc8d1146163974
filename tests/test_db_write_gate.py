"""SQLite writers of one engine queue in the event loop, one transaction at a time, and a
writer the gate cannot serve in time still gets SQLite's own answer."""

from __future__ import annotations

import asyncio

import pytest
from sqlalchemy import func, select, text
from sqlalchemy.ext.asyncio import AsyncEngine

from db.engine import session_factory
from db.models import User
from db.models.base import utcnow
from db.sqlite_adapter import WriteGate


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
    assert not t2.done()  # queued behind the open transaction
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
        async with asyncio.timeout(30):  # bounds a hang only
            assert await _users(sqlite_engine) == []  # WAL: the reader sees the last commit


async def test_a_writer_that_waited_too_long_goes_on_to_sqlite() -> None:
    gate = WriteGate(timeout=0.05)
    holder, late = object(), object()
    await gate.enter(holder)
    async with asyncio.timeout(30):  # bounds a hang only
        await gate.enter(late)  # gives up on the gate instead of hanging
    gate.leave(late)  # not the holder: nothing happens
    gate.leave(holder)
    await gate.enter(late)  # free again
    gate.leave(late)
