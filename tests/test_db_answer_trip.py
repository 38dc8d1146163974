"""The answer's write with its usage rows in one trip to SQLite's thread stores what the
plain statements store; a failure in either rolls both back and lets the next writer in;
and the answer and request start on a bare connection (no session) behave the same."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from db.engine import session_factory
from db.models.core import Message
from db.models.usage import ModelUsage
from db.repos import core as repo
from db.repos import last_writes
from db.repos import usage as usage_repo

NOW = datetime(2026, 3, 4, 5, 6, 7, 891011, tzinfo=UTC)


async def _user_and_session(sqlite_engine: AsyncEngine) -> tuple[int, int]:
    async with session_factory(sqlite_engine)() as s, s.begin():
        user = await repo.get_or_create_user(s, 7, "Ann", NOW)
        session = await repo.create_session(s, user.id, "chat", NOW)
        return user.id, session.id


def _usage(uid: int, sid: int, request_id: str, **over: Any) -> dict[str, Any]:
    # The keywords Meter.record passes
    return {
        "at": NOW,
        "user_id": uid,
        "session_id": sid,
        "request_id": request_id,
        "provider_id": "chatcmpl-1",
        "purpose": "chat",
        "model": "gpt-test",
        "prompt_tokens": 120,
        "completion_tokens": 7,
        "cached_tokens": 3,
        "reasoning_tokens": 0,
        "estimated": True,
        "cost_usd": 0.0125,
        **over,
    }


def _columns(row: ModelUsage) -> tuple[Any, ...]:
    return tuple(getattr(row, c) for c in usage_repo.TABLE.c.keys() if c != "id")


async def _messages(sqlite_engine: AsyncEngine) -> list[str]:
    async with session_factory(sqlite_engine)() as s:
        return list((await s.execute(select(Message.content).order_by(Message.id))).scalars())


async def _usage_rows(sqlite_engine: AsyncEngine) -> list[ModelUsage]:
    async with session_factory(sqlite_engine)() as s:
        return list((await s.execute(select(ModelUsage).order_by(ModelUsage.id))).scalars())


async def test_deferred_usage_rows_are_stored_with_the_answer_as_the_plain_insert(
    sqlite_engine: AsyncEngine,
) -> None:
    uid, sid = await _user_and_session(sqlite_engine)
    sf = session_factory(sqlite_engine)
    async with sf() as s, s.begin():
        await usage_repo.add_usage(s, **_usage(uid, sid, "r1"))
    async with sf() as s, s.begin():
        rows = usage_repo.defer_rows(s)
        await usage_repo.add_usage(s, **_usage(uid, sid, "r1"))
        await usage_repo.add_usage(s, **_usage(uid, sid, "r1", cost_usd=None, estimated=False))
        usage_repo.stop_deferring(s)
        assert len(rows) == 2
        await last_writes.add_message_commit(
            s, usage_rows=rows, session_id=sid, user_id=uid, role="assistant", content="a",
            request_id="r1", now=NOW,
        )  # fmt: skip
    plain, first, second = await _usage_rows(sqlite_engine)
    assert _columns(first) == _columns(plain)
    assert first.at == NOW
    assert (second.cost_usd, second.estimated) == (None, False)
    assert await _messages(sqlite_engine) == ["a"]


async def test_a_failing_usage_row_rolls_back_the_answer_and_lets_the_next_writer_in(
    sqlite_engine: AsyncEngine,
) -> None:
    # One transaction as before: a usage row that cannot be stored takes the answer with it
    # (the caller's error path), never an answer stored with its spending silently lost.
    uid, sid = await _user_and_session(sqlite_engine)
    sf = session_factory(sqlite_engine)
    with pytest.raises(Exception, match="FOREIGN KEY"):
        async with sf() as s, s.begin():
            await last_writes.add_message_commit(
                s, usage_rows=[_usage(uid + 99, sid, "r1")], session_id=sid, user_id=uid,
                role="assistant", content="lost", request_id="r1", now=NOW,
            )  # fmt: skip
    with pytest.raises(Exception, match="FOREIGN KEY"):
        async with sf() as s, s.begin():
            await last_writes.add_message_commit(
                s, usage_rows=[_usage(uid, sid, "r2")], session_id=sid + 99, user_id=uid,
                role="assistant", content="lost too", request_id="r2", now=NOW,
            )  # fmt: skip

    async def write() -> None:
        async with sf() as s, s.begin():
            await last_writes.add_message_commit(
                s, usage_rows=[_usage(uid, sid, "r3")], session_id=sid, user_id=uid,
                role="assistant", content="kept", request_id="r3", now=NOW,
            )  # fmt: skip

    # Under the 10 s write-gate wait: a gate left held would take that long.
    await asyncio.wait_for(write(), 8)
    assert await _messages(sqlite_engine) == ["kept"]
    assert [r.request_id for r in await _usage_rows(sqlite_engine)] == ["r3"]


async def test_the_answer_on_a_bare_connection_commits_and_a_failure_releases_the_gate(
    sqlite_engine: AsyncEngine,
) -> None:
    uid, sid = await _user_and_session(sqlite_engine)
    with pytest.raises(Exception, match="FOREIGN KEY"):
        async with sqlite_engine.connect() as conn:
            await last_writes.add_message_commit(
                conn, session_id=sid + 99, user_id=uid, role="assistant", content="lost",
                request_id="r1", now=NOW,
            )  # fmt: skip
            await conn.commit()

    async def write() -> None:
        async with sqlite_engine.connect() as conn:
            await last_writes.add_message_commit(
                conn, session_id=sid, user_id=uid, role="assistant", content="kept",
                request_id="r2", now=NOW,
            )  # fmt: skip
            await conn.commit()

    # Under the 10 s write-gate wait: a gate left held would take that long.
    await asyncio.wait_for(write(), 8)
    assert await _messages(sqlite_engine) == ["kept"]


async def test_the_request_start_on_a_bare_connection_stores_the_message(
    sqlite_engine: AsyncEngine,
) -> None:
    uid, sid = await _user_and_session(sqlite_engine)
    async with sqlite_engine.connect() as conn:
        started = await last_writes.start_request_commit(
            conn, telegram_id=7, user_name="Ann", period_over=lambda _s, _tz: False,
            history_limit=64, session_id=0, user_id=0, role="user", content="hi",
            request_id="r1", now=NOW,
        )  # fmt: skip
    assert started is not None
    assert (started.user.id, started.session_id) == (uid, sid)
    assert [r.id for r in started.rows] == [started.message_id]
    async with sqlite_engine.connect() as conn:
        renamed = await last_writes.start_request_commit(
            conn, telegram_id=7, user_name="Anna", period_over=lambda _s, _tz: False,
            history_limit=64, session_id=0, user_id=0, role="user", content="not stored",
            request_id="r2", now=NOW,
        )  # fmt: skip
    assert renamed is None  # the caller's session path does the rename
    assert await _messages(sqlite_engine) == ["hi"]


async def test_a_whole_second_time_is_stored_as_sqlalchemy_stores_it(
    sqlite_engine: AsyncEngine,
) -> None:
    # The stored text is what budget and history queries compare: sqlite3's own datetime
    # adapter would drop ".000000" and sort such a row before a bound period start.
    uid, sid = await _user_and_session(sqlite_engine)
    sf = session_factory(sqlite_engine)
    whole = NOW.replace(microsecond=0)
    async with sf() as s, s.begin():
        await usage_repo.add_usage(s, **_usage(uid, sid, "plain", at=whole))
        await repo.add_message(
            s, session_id=sid, user_id=uid, role="user", content="plain", request_id="plain",
            now=whole,
        )  # fmt: skip
    async with sf() as s, s.begin():
        await last_writes.add_message_commit(
            s, usage_rows=[_usage(uid, sid, "trip", at=whole)], session_id=sid, user_id=uid,
            role="assistant", content="trip", request_id="trip", now=whole,
        )  # fmt: skip
    async with sqlite_engine.connect() as conn:
        usage_at = (await conn.exec_driver_sql("SELECT DISTINCT at FROM model_usage")).all()
        message_at = (await conn.exec_driver_sql("SELECT DISTINCT created_at FROM messages")).all()
    assert usage_at == [("2026-03-04 05:06:07.000000",)]
    assert message_at == [("2026-03-04 05:06:07.000000",)]
