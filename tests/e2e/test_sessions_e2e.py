"""Sessions through Telegram: the split, /newsession, /sessions and /timezone."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import select, update

from bot.agent.prompt import without_context
from bot.sessions import summary
from bot.sessions.background import ARCHIVE
from bot.sessions.models import SessionArchive
from bot.telegram.delivery import TelegramDelivery
from db.models import ChatSession, User
from tests.e2e.conftest import OWNER, TG
from tests.fakes.openai_server import Calls, Text
from tests.polling import until
from tests.prompt_blocks import context_of

SUMMARY = (
    "The user is planning a trip to Lisbon in May with their sister and wants a quiet "
    "hotel near the river; the booking is still open."
)


async def split_job(tg: TG) -> Callable[[], Awaitable[Any]]:
    """The session-split job as `sidekick run` schedules it: from the features' job specs."""
    specs = await tg.app.start_features(TelegramDelivery(tg.runtime.outbox))
    return next(run for job_id, _, _, run in specs if job_id == "session-split")


def chat_requests(tg: TG) -> list[dict]:  # type: ignore[type-arg]
    return [r for r in tg.llm.requests if r.get("stream")]


async def talk(tg: TG, text: str, answer: str) -> None:
    tg.llm.add(Text(answer))
    await tg.send(OWNER, text)
    assert (await tg.reply(OWNER)).text == answer


async def test_after_a_split_history_is_empty_but_the_summary_is_recalled(tg: TG) -> None:
    await talk(tg, "I am planning a trip to Lisbon in May with my sister", "Lovely!")
    await talk(tg, "We want a quiet hotel near the river", "Here are two.")
    app = tg.app
    # The bot was down over midnight: the session started two days ago.
    async with app.session_factory() as s, s.begin():
        await s.execute(update(ChatSession).values(started_at=app.deps.clock() - timedelta(days=2)))
    split = await split_job(tg)
    tg.llm.add(Text(SUMMARY))
    report = await split()
    assert len(report.archived) == 1
    assert (await split()).total == 0  # once, not twice

    await talk(tg, "Which hotel did we talk about for Lisbon?", "The quiet one.")
    request = chat_requests(tg)[-1]["messages"]
    # A new session: the history holds only the new message...
    assert [without_context(m["content"]) for m in request[1:]] == [
        "Which hotel did we talk about for Lisbon?"
    ]
    # ...and the previous session's summary comes back through memory auto-recall.
    assert SUMMARY in context_of(request)


async def test_first_message_after_downtime_starts_fresh_before_the_job_runs(tg: TG) -> None:
    await talk(tg, "I am planning a trip to Lisbon in May with my sister", "Lovely!")
    app = tg.app
    async with app.session_factory() as s, s.begin():
        await s.execute(update(ChatSession).values(started_at=app.deps.clock() - timedelta(days=2)))
    # Telegram delivers the message queued while the bot was down before any job ran.
    await talk(tg, "good morning!", "Morning!")
    request = chat_requests(tg)[-1]["messages"]
    assert [without_context(m["content"]) for m in request[1:]] == ["good morning!"]
    # The closed session's summary is written by the next run, once.
    split = await split_job(tg)
    tg.llm.add(Text(SUMMARY))
    assert len((await split()).archived) == 1
    assert (await split()).total == 0
    await talk(tg, "Which hotel did we want in Lisbon?", "A quiet one.")
    assert SUMMARY in context_of(chat_requests(tg)[-1]["messages"])


async def test_newsession_archives_and_sessions_lists(tg: TG) -> None:
    await talk(tg, "I am planning a trip to Lisbon in May with my sister", "Lovely!")
    tg.llm.add(Text(SUMMARY))
    await tg.send(OWNER, "/newsession Trip planning")
    text = (await tg.reply(OWNER)).text
    assert "Started a new session: Trip planning." in text
    assert "writing its summary to memory in the background" in text
    await tg.app.part(ARCHIVE).idle()

    await talk(tg, "hello", "hi")
    request = chat_requests(tg)[-1]["messages"]
    assert [without_context(m["content"]) for m in request[1:]] == ["hello"]
    assert SUMMARY in context_of(request)

    await tg.send(OWNER, "/sessions")
    listing = (await tg.reply(OWNER)).text
    assert listing.startswith("Your recent sessions (times in UTC):")
    assert "• Trip planning — " in listing and "→ now (current) · 2 messages" in listing
    assert "· 2 messages\n  The user is planning a trip to Lisbon" in listing
    assert "Sessions split every day at 00:00" in listing
    assert len(tg.server.sent_to(OWNER)) == 4


async def test_a_session_the_model_ends_is_summarised_into_memory_at_once(tg: TG) -> None:
    """Asked for a fresh start in words, the model ends the session with its tool: the
    next message starts empty and the ended session's summary is in memory, written in the
    background right after the answer (not left for the night's split)."""
    await talk(tg, "I am planning a trip to Lisbon in May with my sister", "Lovely!")
    tg.llm.add(Calls([("new_session", {})]), Text("Done, a fresh start."), Text(SUMMARY))
    await tg.send(OWNER, "let's start over")
    assert (await tg.reply(OWNER)).text == "Done, a fresh start."
    await until(lambda: len(summary_requests(tg)) == 1, "the summary was asked for")
    await tg.app.part(ARCHIVE).idle()
    async with tg.app.session_factory() as s:
        archived = (await s.execute(select(SessionArchive.archived_at))).scalars().all()
    assert len(archived) == 1 and archived[0] is not None

    await talk(tg, "hello", "hi")
    request = chat_requests(tg)[-1]["messages"]
    assert [without_context(m["content"]) for m in request[1:]] == ["hello"]
    assert SUMMARY in context_of(request)


async def test_newsession_with_the_model_down_still_starts_fresh(tg: TG) -> None:
    from tests.fakes.openai_server import Error

    await talk(tg, "remember the blue bike", "ok")
    tg.llm.add(Error(503), Error(503), Error(503))
    await tg.send(OWNER, "/newsession")
    assert "Started a new session" in (await tg.reply(OWNER)).text
    await tg.app.part(ARCHIVE).idle()
    await tg.send(OWNER, "/sessions")
    assert "(summary pending)" in (await tg.reply(OWNER)).text


def summary_requests(tg: TG) -> list[dict]:  # type: ignore[type-arg]
    return [r for r in tg.llm.requests if not r.get("stream")]


async def test_newsession_answers_before_a_slow_summary_written_once(tg: TG) -> None:
    """A slow local model takes minutes to summarise: /newsession answers at once, the
    summary is written in the background, and the split job meanwhile leaves the session
    to that one writer (no second summary call for it)."""
    await talk(tg, "I am planning a trip to Lisbon in May with my sister", "Lovely!")
    slow = asyncio.Event()
    tg.llm.add(Text(SUMMARY, after=slow))
    await tg.send(OWNER, "/newsession")
    text = (await tg.reply(OWNER)).text  # while the model is still writing the summary
    assert "Started a new session" in text and "in the background" in text
    for _ in range(1200):  # the summary call reaches the model
        if summary_requests(tg):
            break
        await asyncio.sleep(0.05)
    # The scheduler's run while the summary is written leaves the session to its writer.
    assert (await (await split_job(tg))()).total == 0
    assert len(summary_requests(tg)) == 1
    slow.set()
    await tg.app.part(ARCHIVE).idle()
    assert (await (await split_job(tg))()).total == 0  # archived once, nothing left
    await tg.send(OWNER, "/sessions")
    assert "The user is planning a trip to Lisbon" in (await tg.reply(OWNER)).text
    assert len(summary_requests(tg)) == 1


async def test_timezone_show_set_refuse_reset(tg: TG) -> None:
    await tg.send(OWNER, "/timezone")
    shown = (await tg.reply(OWNER)).text
    assert shown.startswith("Your time zone: UTC (the default (TIMEZONE)).")

    await tg.send(OWNER, "/timezone europe/berlin")
    assert (await tg.reply(OWNER)).text.startswith("Time zone set to Europe/Berlin.")
    async with tg.app.session_factory() as s:
        tz = (await s.execute(select(User.timezone).where(User.telegram_id == OWNER))).scalar()
    assert tz == "Europe/Berlin"

    await tg.send(OWNER, "/timezone Europe/Berln")
    refused = (await tg.reply(OWNER)).text
    assert "I don't know the time zone 'Europe/Berln'" in refused
    assert "Did you mean: Europe/Berlin" in refused
    for bad in ("../../etc/passwd", "Not/AZone", "+02:00"):
        await tg.send(OWNER, f"/timezone {bad}")
        assert "I don't know the time zone" in (await tg.reply(OWNER)).text

    await tg.send(OWNER, "/timezone")
    assert "Your time zone: Europe/Berlin (your own)" in (await tg.reply(OWNER)).text
    await tg.send(OWNER, "/timezone default")
    assert (await tg.reply(OWNER)).text.startswith("Time zone reset to the default, UTC.")
    async with tg.app.session_factory() as s:
        tz = (await s.execute(select(User.timezone).where(User.telegram_id == OWNER))).scalar()
    assert tz is None
    assert tg.llm.requests == []  # commands never reach the model


async def wait_for_summary_call(tg: TG) -> None:
    for _ in range(1200):
        if summary_requests(tg):
            return
        await asyncio.sleep(0.05)


async def test_a_summary_slower_than_the_chat_deadline_is_still_kept(
    make_tg: Callable[..., Awaitable[TG]],
) -> None:
    """A summary has a time budget of its own, well past LLM_TIMEOUT_S: a slow local model
    that takes longer than a chat answer may still write it."""
    tg = await make_tg(llm_timeout_s=1)
    await talk(tg, "I am planning a trip to Lisbon in May with my sister", "Lovely!")
    slow = asyncio.Event()
    tg.llm.add(Text(SUMMARY, after=slow))
    await tg.send(OWNER, "/newsession")
    assert "in the background" in (await tg.reply(OWNER)).text
    await wait_for_summary_call(tg)
    await asyncio.sleep(2.5)  # past LLM_TIMEOUT_S: a chat call would have been given up
    slow.set()
    await tg.app.part(ARCHIVE).idle()
    await tg.send(OWNER, "/sessions")
    assert "The user is planning a trip to Lisbon" in (await tg.reply(OWNER)).text


async def test_a_summary_past_its_budget_is_abandoned_and_left_for_later(
    tg: TG, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(summary, "SUMMARY_MIN_S", 0.5)
    await talk(tg, "I am planning a trip to Lisbon in May with my sister", "Lovely!")
    tg.llm.add(Text(SUMMARY, after=asyncio.Event()))  # never answers
    await tg.send(OWNER, "/newsession")
    await tg.reply(OWNER)
    await tg.app.part(ARCHIVE).idle()
    async with tg.app.session_factory() as s:
        [row] = (await s.execute(select(SessionArchive))).scalars().all()
    assert row.archived_at is None and row.attempts == 1
    assert "no summary within its 0.5 s budget" in (row.last_error or "")
    assert row.claimed_until is None  # released: the split job takes it up after the backoff
    await tg.send(OWNER, "/sessions")
    assert "(summary pending)" in (await tg.reply(OWNER)).text


def test_a_sessions_date_is_said_once_when_it_starts_and_ends_that_day() -> None:
    from datetime import UTC, datetime
    from zoneinfo import ZoneInfo

    from bot.sessions.commands import span

    berlin = ZoneInfo("Europe/Berlin")
    start, end = (
        datetime(2026, 11, 28, 8, 0, tzinfo=UTC),
        datetime(2026, 11, 28, 16, 30, tzinfo=UTC),
    )
    assert span(start, end, berlin) == "2026-11-28 09:00–17:30"
    late = datetime(2026, 11, 28, 23, 30, tzinfo=UTC)  # after midnight in Berlin
    assert span(start, late, berlin) == "2026-11-28 09:00 → 2026-11-29 00:30"
