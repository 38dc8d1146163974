"""The split job on an injected clock: per-zone splits, DST, catch-up, retries."""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from bot.sessions.split import EVERY
from scheduler.setup import Scheduler
from tests.fakes.openai_server import Error, FakeOpenAI, Text
from tests.sessions_env import make_env, summary_requests

BERLIN = ZoneInfo("Europe/Berlin")
SUMMARY = "The user talked about their garden and the tomatoes that did not grow this year."


def berlin(*args: int) -> datetime:
    return datetime(*args, tzinfo=BERLIN).astimezone(UTC)  # type: ignore[misc]


TOPICS = [
    "their garden and the tomatoes that did not grow this year",
    "a birthday present for their brother, probably a climbing rope",
    "learning Portuguese before the summer holidays in Porto",
    "fixing a leaking kitchen tap without calling a plumber",
    "the quarterly report that is due before the board meeting",
]


def summaries() -> Callable[[dict[str, Any]], Text]:
    """A different plausible summary for each archive (identical ones would be merged)."""
    count = itertools.count()

    def respond(body: dict[str, Any]) -> Text:
        topic = TOPICS[next(count) % len(TOPICS)]
        return Text(f"The user talked about {topic}; nothing else was decided.")

    return respond


@pytest.mark.db
async def test_daily_split_in_berlin_across_spring_forward(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    fake_llm.responder = summaries()
    async with make_env(
        tmp_path, fake_llm, berlin(2026, 3, 28, 20, 0), timezone="Europe/Berlin"
    ) as env:
        uid, s1 = await env.chat(1, "my tomatoes did not grow", "Sorry to hear that")
        env.clock.now = berlin(2026, 3, 28, 23, 59)
        assert (await env.jobs.split_sessions()).total == 0
        env.clock.now = berlin(2026, 3, 29, 0, 0)  # 23:00Z
        report = await env.jobs.split_sessions()
        assert report.archived == [s1]
        assert (await env.session(s1)).ended_at == env.clock.now
        # The next message opens a new session; the day of the change has 23 hours.
        env.clock.now = berlin(2026, 3, 29, 9, 0)
        _, s2 = await env.chat(1, "hello again", "hi")
        assert s2 != s1
        env.clock.now = datetime(2026, 3, 29, 21, 59, tzinfo=UTC)  # 23:59 CEST
        assert (await env.jobs.split_sessions()).total == 0
        env.clock.now = datetime(2026, 3, 29, 22, 0, tzinfo=UTC)  # midnight CEST
        assert (await env.jobs.split_sessions()).archived == [s2]
        assert len(await env.memories(uid, "short")) == 2


@pytest.mark.db
async def test_weekly_split_waits_for_monday(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    fake_llm.responder = summaries()
    async with make_env(
        tmp_path,
        fake_llm,
        berlin(2026, 10, 21, 10, 0),  # a Wednesday; the clocks go back on Sunday
        timezone="Europe/Berlin",
        session_split="weekly 04:00",
    ) as env:
        _, sid = await env.chat(1, "weekly plans: finish the report", "Got it")
        for day in (22, 23, 24, 25):
            env.clock.now = berlin(2026, 10, day, 12, 0)
            assert (await env.jobs.split_sessions()).total == 0
        env.clock.now = berlin(2026, 10, 26, 3, 59)
        assert (await env.jobs.split_sessions()).total == 0
        env.clock.now = berlin(2026, 10, 26, 4, 0)
        assert (await env.jobs.split_sessions()).archived == [sid]


@pytest.mark.db
async def test_none_never_splits_but_pending_summaries_are_written(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    from bot.sessions.lifecycle import start_new_session

    fake_llm.responder = summaries()
    t0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    async with make_env(tmp_path, fake_llm, t0, session_split="none") as env:
        _, s1 = await env.chat(1, "a long running conversation", "yes")
        env.clock.advance(days=40)
        assert (await env.jobs.split_sessions()).total == 0
        assert (await env.session(s1)).ended_at is None
        # A session closed without an archiver (the model's own request) is archived
        # by the next run even with splitting off.
        await start_new_session(env.sf, env.clock, telegram_user_id=1)
        assert (await env.jobs.split_sessions()).archived == [s1]


@pytest.mark.db
async def test_per_user_time_zones(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    fake_llm.responder = summaries()
    t0 = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)  # 19:00 Tokyo, 02:00 Los Angeles
    async with make_env(tmp_path, fake_llm, t0, timezone="Europe/Berlin") as env:
        _, tokyo = await env.chat(1, "tokyo user here", "hi", timezone="Asia/Tokyo")
        _, la = await env.chat(2, "los angeles user here", "hi", timezone="America/Los_Angeles")
        _, default = await env.chat(3, "berlin by default", "hi")
        env.clock.now = datetime(2026, 11, 20, 15, 0, tzinfo=UTC)  # midnight in Tokyo
        assert (await env.jobs.split_sessions()).archived == [tokyo]
        env.clock.now = datetime(2026, 11, 20, 23, 0, tzinfo=UTC)  # midnight in Berlin
        assert (await env.jobs.split_sessions()).archived == [default]
        env.clock.now = datetime(2026, 11, 21, 8, 0, tzinfo=UTC)  # midnight in LA
        assert (await env.jobs.split_sessions()).archived == [la]


@pytest.mark.db
async def test_catch_up_after_two_days_down(
    tmp_path: Path, fake_llm: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    fake_llm.responder = summaries()
    async with make_env(
        tmp_path, fake_llm, berlin(2026, 11, 20, 18, 0), timezone="Europe/Berlin"
    ) as env:
        a, sa = await env.chat(1, "first user chat", "ok")
        b, sb = await env.chat(2, "second user chat", "ok")
        env.clock.advance(days=2, hours=3)  # the bot was down over two midnights
        with caplog.at_level(logging.INFO, logger="bot.sessions.split"):
            first = await env.jobs.split_sessions()
            second = await env.jobs.split_sessions()
        assert sorted(first.archived) == [sa, sb] and second.total == 0
        assert len(await env.memories(a, "short")) == 1
        assert len(await env.memories(b, "short")) == 1
        assert len(summary_requests(fake_llm)) == 2
        assert "session split: 2 archived" in caplog.text


@pytest.mark.db
async def test_failed_archive_backs_off_then_succeeds(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    t0 = datetime(2026, 11, 20, 18, 0, tzinfo=UTC)
    async with make_env(tmp_path, fake_llm, t0) as env:
        uid, sid = await env.chat(1, "something worth remembering", "ok")
        env.clock.now = datetime(2026, 11, 21, 0, 5, tzinfo=UTC)
        fake_llm.add(Error(500), Error(500), Error(500))
        assert (await env.jobs.split_sessions()).failed == [sid]
        assert (await env.session(sid)).ended_at is None  # still open: nothing lost
        calls = len(fake_llm.requests)
        env.clock.advance(seconds=30)  # inside the backoff: not retried yet
        assert (await env.jobs.split_sessions()).total == 0
        assert len(fake_llm.requests) == calls
        env.clock.advance(minutes=1)
        fake_llm.add(Text(SUMMARY))
        assert (await env.jobs.split_sessions()).archived == [sid]
        assert len(await env.memories(uid, "short")) == 1


@pytest.mark.db
async def test_the_real_scheduler_catches_up_at_startup(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    fake_llm.responder = summaries()
    t0 = datetime(2026, 11, 20, 18, 0, tzinfo=UTC)
    async with make_env(tmp_path, fake_llm, t0) as env:
        uid, sid = await env.chat(1, "before the downtime", "ok")
        env.clock.advance(days=2)
        split = ("session-split", "archive due sessions", EVERY, env.jobs.split_sessions)
        scheduler = Scheduler([split])
        assert set(scheduler.next_runs()) == {"session-split"}
        scheduler.start()
        try:
            assert scheduler.running
            for _ in range(6000):  # the startup run archives the due session (within a minute)
                if (await env.session(sid)).ended_at is not None:
                    break
                await asyncio.sleep(0.01)
            assert (await env.session(sid)).ended_at is not None
            for next_run in scheduler.next_runs().values():
                assert next_run is not None
                assert next_run > datetime.now(UTC) - timedelta(seconds=5)
        finally:
            await scheduler.stop()
        assert not scheduler.running
        assert len(await env.memories(uid, "short")) == 1
        await scheduler.stop()  # a second stop is harmless


def test_the_minute_grid_after_a_startup_run_and_after_a_run_on_the_grid() -> None:
    from scheduler.setup import AlignedInterval

    minute = datetime(2026, 11, 27, 5, 0, tzinfo=UTC)
    trigger = AlignedInterval(seconds=60, start_date=minute, timezone=UTC)
    at = datetime(2026, 11, 27, 5, 11, 59, 500_000, tzinfo=UTC)  # started just before 05:12
    assert trigger.get_next_fire_time(at, at + timedelta(milliseconds=10)) == at.replace(
        minute=12, second=0, microsecond=0
    )
    on_grid = datetime(2026, 11, 27, 5, 12, tzinfo=UTC)  # the same instant is not run twice
    assert trigger.get_next_fire_time(on_grid, on_grid) == on_grid + timedelta(minutes=1)
