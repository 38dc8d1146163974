"""A message's hot-path writes ending their transaction in one trip to SQLite's thread store
what the plain statements store, keep the ORM's pending changes in the same transaction,
and leave the write gate to the next writer, also when they fail."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from db.engine import session_factory
from db.models import User
from db.models.core import Message
from db.repos import core as repo
from db.repos import last_writes

NOW = datetime(2026, 3, 4, 5, 6, 7, 891011, tzinfo=UTC)


async def _user_and_session(sqlite_engine: AsyncEngine) -> tuple[int, int]:
    async with session_factory(sqlite_engine)() as s, s.begin():
        user = await repo.get_or_create_user(s, 7, "Ann", NOW)
        session = await repo.create_session(s, user.id, "chat", NOW)
        return user.id, session.id


async def test_message_and_history_are_stored_and_read_as_the_plain_statements(
    sqlite_engine: AsyncEngine,
) -> None:
    uid, sid = await _user_and_session(sqlite_engine)
    sf = session_factory(sqlite_engine)
    async with sf() as s, s.begin():
        first = await repo.add_message(
            s, session_id=sid, user_id=uid, role="assistant", content="", request_id="r0",
            now=NOW, tool_calls='[{"id": "c1"}]',
        )  # fmt: skip
    async with sf() as s, s.begin():
        new_id, rows = await last_writes.add_message_history_commit(
            s, history_limit=64, session_id=sid, user_id=uid, role="user", content="hi",
            request_id="r1", now=NOW, telegram_message_id=55, kind="voice",
        )  # fmt: skip
    async with sf() as s:
        plain = await repo.history_rows(s, sid, 64)
        stored = (await s.execute(select(Message).where(Message.id == new_id))).scalar_one()
    assert [tuple(r) for r in rows] == [tuple(r) for r in plain]
    assert [r.id for r in rows] == [first, new_id]
    assert rows[0].tool_calls == '[{"id": "c1"}]'
    assert (stored.role, stored.content, stored.request_id) == ("user", "hi", "r1")
    assert (stored.telegram_message_id, stored.kind, stored.tool_name) == (55, "voice", None)
    assert stored.created_at == NOW


async def test_a_history_limit_keeps_the_newest_rows_oldest_first(
    sqlite_engine: AsyncEngine,
) -> None:
    uid, sid = await _user_and_session(sqlite_engine)
    sf = session_factory(sqlite_engine)
    ids = []
    for n in range(3):
        async with sf() as s, s.begin():
            message = {"role": "user", "content": str(n), "request_id": f"r{n}", "now": NOW}
            ids.append(
                await last_writes.add_message_commit(s, session_id=sid, user_id=uid, **message)
            )
    async with sf() as s, s.begin():
        new_id, rows = await last_writes.add_message_history_commit(
            s, history_limit=2, session_id=sid, user_id=uid, role="user", content="3",
            request_id="r3", now=NOW,
        )  # fmt: skip
    assert [r.id for r in rows] == [ids[2], new_id]
    assert [r.content for r in rows] == ["2", "3"]


async def test_a_pending_orm_change_is_committed_with_the_message(
    sqlite_engine: AsyncEngine,
) -> None:
    uid, sid = await _user_and_session(sqlite_engine)
    sf = session_factory(sqlite_engine)
    async with sf() as s, s.begin():
        user = await s.get(User, uid)
        assert user is not None
        user.name = "Anna"
        await last_writes.add_message_commit(
            s, session_id=sid, user_id=uid, role="user", content="x", request_id="r", now=NOW
        )
    async with sf() as s:
        assert (await s.get(User, uid)).name == "Anna"  # type: ignore[union-attr]


async def test_a_failed_write_rolls_back_and_lets_the_next_writer_in(
    sqlite_engine: AsyncEngine,
) -> None:
    uid, sid = await _user_and_session(sqlite_engine)
    sf = session_factory(sqlite_engine)
    with pytest.raises(Exception, match="FOREIGN KEY"):
        async with sf() as s, s.begin():
            user = await s.get(User, uid)
            assert user is not None
            user.name = "lost"
            await last_writes.add_message_commit(
                s, session_id=sid + 99, user_id=uid, role="user", content="x", request_id="r",
                now=NOW,
            )  # fmt: skip

    async def write() -> None:
        async with sf() as s, s.begin():
            await last_writes.add_message_commit(
                s, session_id=sid, user_id=uid, role="user", content="y", request_id="r", now=NOW
            )

    # Under the 10 s write-gate wait: a gate left held would take that long.
    await asyncio.wait_for(write(), 8)
    async with sf() as s:
        assert (await s.get(User, uid)).name == "Ann"  # type: ignore[union-attr]
        contents = (await s.execute(select(Message.content))).scalars().all()
    assert list(contents) == ["y"]
