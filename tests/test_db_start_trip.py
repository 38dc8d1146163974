"""A request's start in one trip to SQLite's thread (last_writes.start_request_commit): the
read, the message and the history as the statement-by-statement path gives them; nothing
written when the request needs more (new user, rename, no open session, period over);
a failure rolls back and lets the next writer in."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import func, select, text
from sqlalchemy.ext.asyncio import AsyncEngine

from db.engine import session_factory
from db.models.core import Message, User
from db.models.memory import Memory
from db.repos import core as repo
from db.repos import last_writes

NOW = datetime(2026, 3, 4, 5, 6, 7, 891011, tzinfo=UTC)
STARTED = NOW - timedelta(hours=1)


async def _user_and_session(
    sqlite_engine: AsyncEngine, telegram_id: int | None = 7, memory: bool = False
) -> tuple[int, int]:
    async with session_factory(sqlite_engine)() as s, s.begin():
        user = await repo.get_or_create_user(s, telegram_id, "Ann", STARTED)
        user.timezone, user.llm_model, user.usage_footer = "Europe/Berlin", "m2", True
        user.usage_warned = '{"day": "2026-03-04"}'
        session = await repo.create_session(s, user.id, "chat", STARTED)
        if memory:
            s.add(Memory(user_id=user.id, layer="long", content="likes tea"))
        await s.flush()
        return user.id, session.id


def _never(started: datetime, tz_name: str | None) -> bool:
    return False


async def _start(
    sqlite_engine: AsyncEngine,
    *,
    telegram_id: int | None = 7,
    user_name: str = "Ann",
    period_over: Any = _never,
    content: str = "hi",
) -> last_writes.Started | None:
    async with session_factory(sqlite_engine)() as s, s.begin():
        return await last_writes.start_request_commit(
            s, telegram_id=telegram_id, user_name=user_name, period_over=period_over,
            history_limit=64, session_id=0, user_id=0, role="user", content=content,
            request_id="r1", now=NOW, telegram_message_id=55, kind="voice",
        )  # fmt: skip


async def _message_count(sqlite_engine: AsyncEngine) -> int:
    async with session_factory(sqlite_engine)() as s:
        return int((await s.execute(select(func.count(Message.id)))).scalar_one())


async def test_one_trip_reads_and_stores_what_the_plain_statements_do(
    sqlite_engine: AsyncEngine,
) -> None:
    uid, sid = await _user_and_session(sqlite_engine, memory=True)
    seen: list[tuple[datetime, str | None]] = []

    def period_over(started: datetime, tz_name: str | None) -> bool:
        seen.append((started, tz_name))
        return False

    started = await _start(sqlite_engine, period_over=period_over)
    assert started is not None
    assert seen == [(STARTED, "Europe/Berlin")]
    async with session_factory(sqlite_engine)() as s:
        user, session, has_memories = await repo.request_start(s, 7)
        plain = await repo.history_rows(s, sid, 64)
        stored = (await s.execute(select(Message))).scalar_one()
    assert user is not None and session is not None
    got = started.user
    assert (got.id, got.telegram_id, got.name, got.timezone) == (uid, 7, "Ann", "Europe/Berlin")
    assert (got.llm_model, got.usage_footer, got.usage_warned) == (
        user.llm_model,
        user.usage_footer,
        user.usage_warned,
    )
    assert (started.session_id, started.has_memories) == (session.id, has_memories) == (sid, True)
    assert [tuple(r) for r in started.rows] == [tuple(r) for r in plain]
    assert [r.id for r in started.rows] == [started.message_id] == [stored.id]
    assert (stored.session_id, stored.user_id, stored.role, stored.content) == (
        sid,
        uid,
        "user",
        "hi",
    )
    assert (stored.request_id, stored.telegram_message_id, stored.kind) == ("r1", 55, "voice")
    assert stored.created_at == NOW


async def test_the_local_user_and_a_user_without_memories(sqlite_engine: AsyncEngine) -> None:
    uid, sid = await _user_and_session(sqlite_engine, telegram_id=None)
    started = await _start(sqlite_engine, telegram_id=None)
    assert started is not None
    assert (started.user.id, started.session_id, started.has_memories) == (uid, sid, False)


@pytest.mark.parametrize("case", ["no user", "rename", "no open session", "period over", "raises"])
async def test_nothing_is_written_when_the_request_needs_more(
    sqlite_engine: AsyncEngine, case: str
) -> None:
    if case != "no user":
        uid, sid = await _user_and_session(sqlite_engine)
    if case == "no open session":
        async with session_factory(sqlite_engine)() as s, s.begin():
            await repo.end_session(s, sid, NOW)

    def over(started: datetime, tz_name: str | None) -> bool:
        if case == "raises":
            raise ValueError("bad zone")
        return case == "period over"

    name = "Anna" if case == "rename" else "Ann"
    assert await _start(sqlite_engine, user_name=name, period_over=over) is None
    assert await _message_count(sqlite_engine) == 0
    async with session_factory(sqlite_engine)() as s:
        names = (await s.execute(select(User.name))).scalars().all()
    assert list(names) == ([] if case == "no user" else ["Ann"])
    # No transaction was left open: the next writer goes straight in.
    if case != "no user":

        async def write() -> None:
            async with session_factory(sqlite_engine)() as s, s.begin():
                await last_writes.add_message_commit(
                    s, session_id=sid, user_id=uid, role="user", content="y", request_id="r",
                    now=NOW,
                )  # fmt: skip

        # Under the 10 s write-gate wait: a gate left held would take that long.
        await asyncio.wait_for(write(), 8)
        assert await _message_count(sqlite_engine) == 1


async def test_an_empty_user_name_keeps_the_stored_one(sqlite_engine: AsyncEngine) -> None:
    await _user_and_session(sqlite_engine)
    started = await _start(sqlite_engine, user_name="")
    assert started is not None and started.user.name == "Ann"


async def test_a_failed_insert_rolls_back_and_lets_the_next_writer_in(
    sqlite_engine: AsyncEngine,
) -> None:
    await _user_and_session(sqlite_engine)
    async with sqlite_engine.begin() as conn:
        await conn.execute(
            text(
                "CREATE TRIGGER no_boom BEFORE INSERT ON messages WHEN NEW.content = 'boom' "
                "BEGIN SELECT RAISE(ABORT, 'boom refused'); END"
            )
        )
    with pytest.raises(Exception, match="boom refused"):
        await _start(sqlite_engine, content="boom")
    # Under the 10 s write-gate wait: a gate left held would take that long.
    await asyncio.wait_for(_start(sqlite_engine, content="fine"), 8)
    async with session_factory(sqlite_engine)() as s:
        contents = (await s.execute(select(Message.content))).scalars().all()
    assert list(contents) == ["fine"]
