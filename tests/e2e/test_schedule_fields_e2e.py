"""What the 1.5B model passes to `schedule` (bench/tool_use.py --constrained off --show,
2026-12-06), through the assembled app: a bare time of day in `at` beside the user's words
that give no time of their own is read as the words at that time ("tomorrow" and "09:00":
tomorrow 09:00, not today's passed 09:00; "every day" and "8:00": daily, not once, and not
on the description's example days it copied); two fields that each set the time are one
error that says what to do next, and the model's next call runs."""

from __future__ import annotations

from datetime import datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from sqlalchemy import select

from tests.e2e.conftest import OWNER, TG
from tests.fakes.openai_server import Calls, Text
from tools.reminders.models import ScheduledJob
from tools.reminders.times import ALL_DAYS

NY = ZoneInfo("America/New_York")


def results(tg: TG) -> list[str]:
    """The tool results of the last message's turn."""
    messages = tg.llm.requests[-1]["messages"]
    last = max(i for i, m in enumerate(messages) if m["role"] == "user")
    return [str(m["content"]) for m in messages[last:] if m["role"] == "tool"]


async def all_jobs(tg: TG) -> list[ScheduledJob]:
    async with tg.app.session_factory() as s:
        return list((await s.execute(select(ScheduledJob).order_by(ScheduledJob.id))).scalars())


async def ask(tg: TG, text: str, *calls: dict[str, Any]) -> list[str]:
    tg.llm.add(*(Calls([("schedule", c)]) for c in calls), Text("ok"))
    await tg.send(OWNER, text)
    await tg.idle()
    return results(tg)


async def test_a_time_of_day_beside_words_without_one_is_the_words_at_that_time(tg: TG) -> None:
    await tg.send(OWNER, "/timezone America/New_York")
    await tg.idle()
    before = datetime.now(NY)
    (tomorrow,) = await ask(
        tg,
        "Remind me tomorrow at 9:00 to call mom.",
        {"action": "create", "kind": "reminder", "text": "Call mom", "when": "tomorrow",
         "at": "09:00", "days": "mon,fri"},
    )  # fmt: skip
    assert tomorrow.startswith("Scheduled reminder #1: once at "), tomorrow
    (daily,) = await ask(
        tg,
        "Remind me every day at 8:00 to drink water.",
        {"action": "create", "kind": "reminder", "text": "Drink water", "when": "every day",
         "at": "8:00", "days": "mon,fri"},
    )  # fmt: skip
    assert daily.startswith("Scheduled reminder #2: daily at 08:00"), daily
    call, water = await all_jobs(tg)
    day = before.date() + timedelta(days=1)
    assert call.next_run_at == datetime.combine(day, time(9), tzinfo=NY)
    assert (water.schedule, water.at_time, water.days) == ("cron", "08:00", ALL_DAYS)


async def test_two_fields_that_each_set_the_time_say_what_to_do_and_the_next_call_runs(
    tg: TG,
) -> None:
    both = {"action": "create", "kind": "reminder", "text": "Stretch", "when": "now",
            "at": "2030-01-01 09:00", "in_minutes": 2}  # fmt: skip
    one = {"action": "create", "kind": "reminder", "text": "Stretch", "in_minutes": 2}
    error, done = await ask(tg, "Remind me in 2 minutes to stretch.", both, one)
    assert error.startswith("Error: nothing created: at and in_minutes each set the time"), error
    assert "Call schedule again now with just one of them" in error
    assert done.startswith("Scheduled reminder #1: once at "), done
    assert len(await all_jobs(tg)) == 1


async def test_the_clock_the_prompt_shows_copied_into_when_leaves_the_asked_minutes(
    tg: TG,
) -> None:
    # The 0.5B model (tests/real, 3 of 9 minutes tried) copies the context block's "Now:"
    # into `when` beside the `in_minutes` the person asked for; refused as two times, it
    # then lost its way. The words read as this very minute, which is no reminder's time.
    await tg.send(OWNER, "/timezone America/New_York")
    await tg.idle()
    before = datetime.now(NY)
    shown = f"{before:%Y-%m-%d %H:%M}"
    (done,) = await ask(
        tg,
        "Remind me in 30 minutes to call Ana.",
        {"action": "create", "kind": "reminder", "text": "Call Ana", "when": shown,
         "in_minutes": 30},
    )  # fmt: skip
    assert done.startswith("Scheduled reminder #1: once at "), done
    prompt = str(tg.llm.requests[-2]["messages"][-1]["content"])
    assert f"Now: {before:%A} {shown}" in prompt or before.minute != datetime.now(NY).minute
    (job,) = await all_jobs(tg)
    assert job.next_run_at is not None
    assert timedelta(minutes=29) < job.next_run_at - before < timedelta(minutes=31), job
