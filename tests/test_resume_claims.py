"""Which turns a restart cut, and the claims that continue them (db/repos/resume.py), on
the test's database (SQLite, or PostgreSQL under make test-pg): a recorded tool round is no
answer, one of two workers claiming together wins, a clean stop gives the try back, a turn
is given up once, and the record a continuation starts from ends with the turn's rows."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from db.conversation import Conversation, Started, ToolResult, Turn
from db.engine import SessionFactory, session_factory
from db.models.outbox import OutboxMessage
from db.models.resume import RoundInFlight
from db.repos import resume

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
LATER = T0 + timedelta(minutes=5)


def never(started: datetime, tz_name: str | None) -> bool:
    return False


async def begin(conv: Conversation, text: str, message_id: int, request: str) -> Started:
    return await conv.begin_turn(
        telegram_id=7, user_name="Ann", text=text, kind="text", telegram_message_id=message_id,
        request_id=request, now=T0, period_over=never,
    )  # fmt: skip


async def cut(sf: SessionFactory) -> list[int]:
    async with sf() as s:
        return [c.message_id for c in await resume.cut_turns(s, T0 - timedelta(hours=6), LATER)]


async def test_a_tool_round_is_no_answer_and_the_record_ends_with_it(engine: AsyncEngine) -> None:
    sf, conv = session_factory(engine), Conversation(session_factory(engine))
    answered = await begin(conv, "answered", 1, "r1")
    await conv.record_answer(Turn(answered.session_id, answered.user.id, "r1"), T0, "yes")
    started = await begin(conv, "set a reminder", 2, "r2")
    turn = Turn(started.session_id, started.user.id, "r2")
    wire = [{"id": "c1", "type": "function", "function": {"name": "schedule", "arguments": "{}"}}]
    result = ToolResult("c1", "schedule", "{}", "Scheduled reminder #1", True, None, 1.0)
    await conv.record_tool_round(turn, T0, "", wire, [result])
    assert await cut(sf) == [started.message_id]
    record = await conv.unfinished(started.message_id)
    assert record is not None
    assert (record.request_id, record.text, record.tool_calls) == ("r2", "set a reminder", 1)
    roles = [(r.role, r.content) for r in record.history]
    assert roles == [
        ("user", "answered"), ("assistant", "yes"), ("user", "set a reminder"),
        ("assistant", ""), ("tool", "Scheduled reminder #1"),
    ]  # fmt: skip
    assert json.loads(record.history[3].tool_calls or "[]") == wire


async def test_one_of_two_claims_wins_a_clean_stop_gives_it_back_and_give_up_is_once(
    engine: AsyncEngine,
) -> None:
    sf, conv = session_factory(engine), Conversation(session_factory(engine))
    started = await begin(conv, "cut", 1, "r1")
    mid = started.message_id
    wire = {"role": "assistant", "content": None, "tool_calls": []}
    await conv.record_in_flight(Turn(started.session_id, started.user.id, "r1"), T0, wire, "c1")

    async def claim() -> bool:
        async with sf() as s, s.begin():
            return await resume.claim(s, mid, 0, LATER)

    assert sorted(await asyncio.gather(claim(), claim())) == [False, True]
    async with sf() as s, s.begin():
        assert await resume.tries(s, mid) == 1
        await resume.release(s, mid)
        assert await resume.tries(s, mid) == 0
    assert sorted(await asyncio.gather(claim(), claim())) == [False, True]
    [found] = await _cuts(sf)

    async def give_up() -> int | None:
        async with sf() as s, s.begin():
            return await resume.give_up(s, found, LATER, "told", LATER)

    both = await asyncio.gather(give_up(), give_up())
    assert [r is None for r in sorted(both, key=lambda r: r is None)] == [False, True]
    assert await give_up() is None
    async with sf() as s:
        notices = list((await s.execute(select(OutboxMessage))).scalars())
        assert await resume.tries(s, mid) is None  # given up: cut no more
        assert (await s.execute(select(RoundInFlight))).first() is None  # nothing left of it
    assert [(n.kind, n.text, n.telegram_message_id) for n in notices] == [("notice", "told", 1)]
    assert await cut(sf) == []


async def _cuts(sf: SessionFactory) -> list[resume.Cut]:
    async with sf() as s:
        return await resume.cut_turns(s, T0 - timedelta(hours=6), LATER)
