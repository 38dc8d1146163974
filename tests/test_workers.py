"""Pieces of several-worker mode: update claims (both databases), advisory locks and the
scheduler guard shared by two "workers" (two engines) on one PostgreSQL database."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncEngine

from db.engine import session_factory
from db.locks import Locks
from db.repos import updates
from scheduler.setup import Scheduler
from tests.conftest import pg_only, sqlite_only

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


async def test_an_update_is_claimed_once(engine: AsyncEngine) -> None:
    sf = session_factory(engine)
    assert await updates.claim(sf, 41, 7, NOW)
    assert not await updates.claim(sf, 41, 7, NOW)  # Telegram's retry, or the other worker
    assert await updates.claim(sf, 42, 7, NOW)
    # 42 waits while 41 is in hand, not once 41 is done or abandoned (its worker died).
    assert await updates.earlier_pending(sf, 7, 42, NOW - timedelta(minutes=2))
    assert not await updates.earlier_pending(sf, 7, 42, NOW + timedelta(seconds=1))
    await updates.finish(sf, 41)
    assert not await updates.earlier_pending(sf, 7, 42, NOW - timedelta(minutes=2))
    assert await updates.prune(sf, NOW + timedelta(seconds=1)) == 2
    assert await updates.claim(sf, 41, 7, NOW)  # forgotten after pruning


@sqlite_only
async def test_locks_are_in_process_no_ops_on_sqlite(engine: AsyncEngine) -> None:
    locks = Locks.for_database(engine)
    assert not locks.shared
    async with locks.try_hold("job", "x") as a, locks.try_hold("job", "x") as b:
        assert a and b


@pg_only
async def test_a_chat_lock_excludes_the_other_worker(engine: AsyncEngine) -> None:
    a, b = Locks.for_database(engine), Locks.for_database(engine)
    try:
        assert a.shared
        async with a.hold("chat", 5):
            async with b.try_hold("chat", 5) as got:
                assert not got
            async with b.try_hold("chat", 6) as other_chat:
                assert other_chat
        async with b.try_hold("chat", 5) as got:
            assert got
    finally:
        await a.close()
        await b.close()


@pg_only
async def test_a_due_job_runs_once_with_two_schedulers(engine: AsyncEngine) -> None:
    locks = [Locks.for_database(engine), Locks.for_database(engine)]
    started, gate = asyncio.Event(), asyncio.Event()
    runs = 0

    async def split() -> str:
        nonlocal runs
        runs += 1
        started.set()
        await gate.wait()
        return "done"

    first, second = (
        Scheduler([], guard=lambda job, lk=lk: lk.try_hold("job", job))._tracked("split", split)  # type: ignore[misc]
        for lk in locks
    )
    try:
        running = asyncio.create_task(first())
        await started.wait()
        assert await second() is None  # the other worker has it: skipped, not queued
        gate.set()
        assert await running == "done"
        assert runs == 1
        assert await second() == "done"  # free again: the next due run happens
        assert runs == 2
    finally:
        for lk in locks:
            await lk.close()
