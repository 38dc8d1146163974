"""The conversation seam (db/conversation.py): a turn begins by storing the message in the
user's current session, each tool round and answer is one transaction, and many chats
writing at once all land (on SQLite, no "database is locked")."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import bindparam, event, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.usage import repo as usage_repo
from bot.usage.models import ModelUsage
from db.conversation import (
    HISTORY_ROWS,
    Conversation,
    RecordWrite,
    Started,
    ToolResult,
    Turn,
)
from db.engine import create_engine, session_factory
from db.models import ChatSession, Message, ToolCallRecord, User

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def never(started: datetime, tz_name: str | None) -> bool:
    return False


async def begin(
    conv: Conversation, text: str, tg: int | None = 7, name: str = "Ann", **kw: Any
) -> Started:
    return await conv.begin_turn(
        telegram_id=tg,
        user_name=name,
        text=text,
        kind=kw.get("kind", "text"),
        telegram_message_id=kw.get("telegram_message_id"),
        request_id=kw.get("request_id", "r1"),
        now=kw.get("now", T0),
        period_over=kw.get("period_over", never),
    )


async def count(engine: AsyncEngine, model: Any) -> int:
    async with session_factory(engine)() as s:
        return int((await s.execute(select(func.count()).select_from(model))).scalar_one())


async def test_a_first_message_makes_the_user_and_session_then_reuses_them(
    engine: AsyncEngine,
) -> None:
    conv = Conversation(session_factory(engine))
    first = await begin(conv, "hello", telegram_message_id=11, kind="voice")
    assert first.user.name == "Ann" and first.user.telegram_id == 7
    assert first.user.timezone is None
    assert [(m.id, m.role, m.content) for m in first.history] == [
        (first.message_id, "user", "hello")
    ]
    second = await begin(conv, "again", request_id="r2")
    assert (second.user.id, second.session_id) == (first.user.id, first.session_id)
    assert [m.content for m in second.history] == ["hello", "again"]  # oldest first
    async with session_factory(engine)() as s:
        stored = await s.get(Message, first.message_id)
    assert stored is not None
    assert (stored.kind, stored.telegram_message_id, stored.request_id) == ("voice", 11, "r1")


async def test_the_history_holds_the_newest_rows(engine: AsyncEngine) -> None:
    conv = Conversation(session_factory(engine))
    for i in range(HISTORY_ROWS + 5):
        last = await begin(conv, f"m{i}")
    assert len(last.history) == HISTORY_ROWS
    assert last.history[-1].content == f"m{HISTORY_ROWS + 4}"
    assert [m.content for m in await conv.history(last.session_id, 3)] == [
        f"m{HISTORY_ROWS + n}" for n in (2, 3, 4)
    ]


async def test_a_new_name_is_kept_and_an_empty_one_changes_nothing(engine: AsyncEngine) -> None:
    conv = Conversation(session_factory(engine))
    await begin(conv, "a")
    assert (await begin(conv, "b", name="Anna")).user.name == "Anna"
    assert (await begin(conv, "c", name="")).user.name == "Anna"
    async with session_factory(engine)() as s:
        assert (await s.execute(select(User.name))).scalar_one() == "Anna"


async def test_the_local_user_is_found_again(engine: AsyncEngine) -> None:
    conv = Conversation(session_factory(engine))
    local = await begin(conv, "hi", tg=None, name="me")
    assert local.user.telegram_id is None
    again = await begin(conv, "hi again", tg=None, name="me")
    assert again.user.id == local.user.id and again.session_id == local.session_id


async def test_a_message_after_the_period_closes_the_session_and_opens_a_new_one(
    engine: AsyncEngine,
) -> None:
    conv = Conversation(session_factory(engine))
    first = await begin(conv, "yesterday")
    seen: list[tuple[datetime, str | None]] = []

    def over(started: datetime, tz_name: str | None) -> bool:
        seen.append((started, tz_name))
        return True

    later = T0 + timedelta(days=1)
    second = await begin(conv, "today", now=later, period_over=over)
    assert seen == [(T0, None)]
    assert second.session_id != first.session_id
    assert [m.content for m in second.history] == ["today"]
    async with session_factory(engine)() as s:
        old = await s.get(ChatSession, first.session_id)
    assert old is not None and old.ended_at == later


async def test_a_tool_round_and_the_answer_are_recorded(engine: AsyncEngine) -> None:
    sf = session_factory(engine)
    conv = Conversation(sf)
    started = await begin(conv, "weather?")
    turn = Turn(started.session_id, started.user.id, "r1")
    wire = [{"id": "c1", "type": "function", "function": {"name": "w", "arguments": "{}"}}]
    results = [
        ToolResult("c1", "w", "{}", "sunny", True, None, 1.5),
        ToolResult("c2", "x", "a" * 5000, "Error: no", False, "no", 0.0),
    ]

    def usage(request: str) -> RecordWrite:
        row = {
            "at": T0,
            "user_id": turn.user_id,
            "session_id": turn.session_id,
            "request_id": request,
            "purpose": "chat",
            "model": "m",
            "prompt_tokens": 3,
        }
        return RecordWrite(usage_repo.INSERT, [row])

    # A second writer's rows in the same transaction.
    warned = RecordWrite(
        update(User).where(User.id == bindparam("uid")).values(usage_warned=bindparam("w")),
        [{"uid": turn.user_id, "w": '{"day": "2026-03-01"}'}],
    )

    await conv.record_tool_round(turn, T0, "let me look", wire, results, [usage("r1")])
    await conv.record_answer(turn, T0, "It is sunny.", [usage("r1"), warned])
    rows = await conv.history(turn.session_id, 10)
    assert [(m.role, m.content, m.tool_call_id) for m in rows] == [
        ("user", "weather?", None),
        ("assistant", "let me look", None),
        ("tool", "sunny", "c1"),
        ("tool", "Error: no", "c2"),
        ("assistant", "It is sunny.", None),
    ]
    assert json.loads(rows[1].tool_calls or "") == wire
    async with sf() as s:
        audit = (await s.execute(select(ToolCallRecord).order_by(ToolCallRecord.id))).scalars()
        audit = list(audit)
    assert [(a.tool_call_id, a.ok, a.error) for a in audit] == [
        ("c1", True, None),
        ("c2", False, "no"),
    ]
    assert len(audit[1].arguments) == 4000  # the audit keeps a bounded copy
    assert await count(engine, ModelUsage) == 2
    async with sf() as s:
        assert (await s.get(User, turn.user_id)).usage_warned == '{"day": "2026-03-01"}'  # type: ignore[union-attr]


async def test_a_failing_write_in_a_record_rolls_back_all_of_it(engine: AsyncEngine) -> None:
    conv = Conversation(session_factory(engine))
    started = await begin(conv, "q")
    turn = Turn(started.session_id, started.user.id, "r1")

    # A usage row the database refuses (no purpose): the whole record is rolled back.
    row = {"at": T0, "user_id": turn.user_id, "purpose": None, "model": "m"}
    fails = [RecordWrite(usage_repo.INSERT, [row])]

    result = ToolResult("c1", "w", "{}", "out", True, None, 1.0)
    with pytest.raises(IntegrityError):
        await conv.record_tool_round(turn, T0, "", [], [result], fails)
    with pytest.raises(IntegrityError):
        await conv.record_answer(turn, T0, "lost", fails)
    assert [m.content for m in await conv.history(turn.session_id, 10)] == ["q"]
    assert await count(engine, ToolCallRecord) == 0
    await conv.record_answer(turn, T0, "kept")  # the next writer is not blocked
    assert [m.content for m in await conv.history(turn.session_id, 10)] == ["q", "kept"]


async def test_many_chats_at_once_all_land(sqlite_engine: AsyncEngine) -> None:
    """SQLite's busy timeout queues the writers; none fails with "database is locked"."""
    conv = Conversation(session_factory(sqlite_engine))

    async def chat(tg: int) -> None:
        for n in range(3):
            st = await begin(conv, f"{tg}-{n}", tg=tg, name=str(tg))
            turn = Turn(st.session_id, st.user.id, f"r{tg}-{n}")
            result = ToolResult("c", "t", "{}", "x", True, None, 0.0)
            await conv.record_tool_round(turn, T0, "", [], [result])
            await conv.record_answer(turn, T0, f"answer {tg}-{n}")

    await asyncio.gather(*(chat(tg) for tg in range(30)))
    assert await count(sqlite_engine, User) == 30
    assert await count(sqlite_engine, Message) == 30 * 3 * 4


async def test_a_turn_waits_for_a_write_lock_held_elsewhere(sqlite_engine: AsyncEngine) -> None:
    """On SQLite a database locked by another connection is waited for on the driver's
    thread, without blocking the loop, then the unit goes through."""
    sf = session_factory(sqlite_engine)
    conv = Conversation(sf)
    await begin(conv, "first")
    holding, release = asyncio.Event(), asyncio.Event()

    async def hold() -> None:
        async with sf() as s, s.begin():
            s.add(User(telegram_id=99, name="other", created_at=T0))
            await s.flush()  # the write lock is taken
            holding.set()
            await release.wait()

    holder = asyncio.create_task(hold())
    await holding.wait()
    turn = asyncio.create_task(begin(conv, "second"))
    await asyncio.sleep(0.05)  # the loop keeps running while the turn waits
    assert not turn.done()
    release.set()
    await holder
    started = await asyncio.wait_for(turn, 10)
    assert [m.content for m in started.history] == ["first", "second"]


async def test_two_engines_on_one_file_both_write_under_contention(
    sqlite_engine: AsyncEngine,
) -> None:
    """Two engines on one SQLite file (two workers', or a tool's beside the agent's): a
    record that meets the other's open write transaction waits in the busy handler and
    lands once the lock is gone; without a busy timeout it would fail at once with
    "database is locked"."""
    other = create_engine(sqlite_engine.url.render_as_string())
    try:
        conv = Conversation(session_factory(other))
        await begin(conv, "first")
        writing = asyncio.Event()

        def seen(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
            if statement.startswith("INSERT INTO messages"):  # the turn's first write
                writing.set()

        event.listen(other.sync_engine, "before_cursor_execute", seen)
        async with session_factory(sqlite_engine)() as s, s.begin():
            s.add(User(telegram_id=99, name="other", created_at=T0))
            await s.flush()  # this engine's connection holds the write lock
            turn = asyncio.create_task(begin(conv, "second"))
            await asyncio.wait_for(writing.wait(), 60)
            # Held on while the other engine's write meets the lock; without a busy
            # timeout the turn has failed by now.
            await asyncio.sleep(0.3)
        started = await asyncio.wait_for(turn, 60)
        assert [m.content for m in started.history] == ["first", "second"]
        assert await count(sqlite_engine, User) == 2  # both writers' rows
    finally:
        await other.dispose()
