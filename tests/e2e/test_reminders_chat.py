"""Reminders through the chat: the model's `schedule` calls become rows (times read by the
server in the user's zone), /reminders with its buttons, history, and ownership."""

from __future__ import annotations

from datetime import datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from sqlalchemy import select

from tests.e2e.conftest import OWNER, TG
from tests.e2e.reminders_env import make_env
from tests.fakes.openai_server import Calls, Text
from tools.reminders.firing import ReminderJobs
from tools.reminders.models import ScheduledJob
from tools.reminders.times import WORKDAYS

NY = ZoneInfo("America/New_York")
OTHER = 2000


async def ask(tg: TG, user: int, text: str, args: dict[str, Any]) -> str:
    """The user says `text`, the model calls schedule(args); returns the tool's result."""
    tg.llm.add(Calls([("schedule", args)]), Text("ok"))
    await tg.send(user, text)
    await tg.idle()
    tool = [m for m in tg.llm.requests[-1]["messages"] if m["role"] == "tool"][-1]
    return str(tool["content"])


async def all_jobs(tg: TG) -> list[ScheduledJob]:
    async with tg.app.session_factory() as s:
        return list((await s.execute(select(ScheduledJob).order_by(ScheduledJob.id))).scalars())


async def test_natural_phrasing_through_the_model_becomes_rows(tg: TG) -> None:
    await tg.send(OWNER, "/timezone America/New_York")
    await tg.idle()
    before = datetime.now(NY)
    result = await ask(
        tg,
        OWNER,
        "remind me tomorrow at 9 to call Anna",
        {"action": "create", "kind": "reminder", "text": "call Anna", "when": "tomorrow at 9",
         "at": "tomorrow 09:00"},
    )  # fmt: skip
    assert result.startswith("Scheduled reminder #1: once at ") and "(America/New_York)" in result
    await ask(
        tg,
        OWNER,
        "every weekday at 8 send me the weather and my plan",
        {"action": "create", "kind": "task", "text": "the weather and my plan for today",
         "when": "every weekday at 8", "daily_at": "08:00", "days": "weekdays"},
    )  # fmt: skip
    await ask(
        tg,
        OWNER,
        "in 20 minutes tell me to check the oven",
        {"action": "create", "text": "check the oven", "when": "in 20 minutes", "in_minutes": 20},
    )
    # Only the user's words: the server reads them itself.
    result = await ask(
        tg,
        OWNER,
        "remind me to stretch every 2 hours",
        {"action": "create", "text": "stretch", "when": "every 2 hours"},
    )
    assert "every 2 hours" in result
    after = datetime.now(NY)

    call, plan, oven, stretch = await all_jobs(tg)
    assert (call.kind, call.schedule, call.timezone, call.words) == (
        "reminder", "at", "America/New_York", "tomorrow at 9")  # fmt: skip
    tomorrow = before.date() + timedelta(days=1)
    assert call.next_run_at == datetime.combine(tomorrow, time(9), tzinfo=NY)
    assert (plan.kind, plan.schedule, plan.at_time, plan.days) == (
        "task",
        "cron",
        "08:00",
        WORKDAYS,
    )
    assert plan.next_run_at is not None and plan.next_run_at.astimezone(NY).hour == 8
    assert oven.next_run_at is not None
    assert before + timedelta(minutes=20) - timedelta(seconds=1) <= oven.next_run_at
    assert oven.next_run_at <= after + timedelta(minutes=20)
    assert (stretch.schedule, stretch.every_s) == ("every", 7200)


async def test_past_and_utc_times_come_back_as_clear_errors(tg: TG) -> None:
    result = await ask(
        tg,
        OWNER,
        "remind me on new year's day 2020 at 9",
        {"action": "create", "text": "party", "when": "2020-01-01 at 9", "at": "2020-01-01 09:00"},
    )
    assert result.startswith("Error: 2020-01-01 09:00 is in the past (it is ")
    result = await ask(
        tg,
        OWNER,
        "remind me at 9",
        {"action": "create", "text": "x", "when": "at 9", "at": "2030-01-01T08:00:00Z"},
    )
    assert "without an offset" in result
    assert await all_jobs(tg) == []


async def test_edit_moves_a_reminder_and_changes_its_text(tg: TG) -> None:
    """The schedule tool's edit (the operation the dashboard's form calls too)."""
    await ask(tg, OWNER, "remind me", {"action": "create", "text": "buy milk", "in_minutes": 30})
    [job] = await all_jobs(tg)
    result = await ask(
        tg,
        OWNER,
        "make that every day at 7:15",
        {"action": "edit", "job_id": job.id, "when": "every day at 7:15", "daily_at": "07:15"},
    )
    assert result.startswith(f"Changed #{job.id}: #{job.id} reminder · daily at 07:15")
    # A small model leaves out the action: a job id with a text is an edit, not a new job.
    result = await ask(tg, OWNER, "call it oat milk", {"job_id": job.id, "text": "buy oat milk"})
    assert result.startswith(f"Changed #{job.id}") and result.endswith("buy oat milk")
    [edited] = await all_jobs(tg)
    assert (edited.text, edited.schedule, edited.at_time) == ("buy oat milk", "cron", "07:15")
    assert edited.next_run_at is not None and edited.next_run_at.strftime("%M") == "15"
    await tg.send(OWNER, "/reminders")
    await tg.idle()
    assert "daily at 07:15 every day · next" in tg.server.sent_to(OWNER)[-1].text
    nothing = await ask(tg, OWNER, "change it", {"action": "edit", "job_id": job.id})
    assert "edit needs a new `text` or a new time" in nothing
    theirs = await ask(tg, OTHER, "mine", {"action": "edit", "job_id": job.id, "text": "x"})
    assert f"there is no reminder or task #{job.id}" in theirs
    assert [j.text for j in await all_jobs(tg)] == ["buy oat milk"]


async def test_reminders_list_cancel_button_and_history(tg: TG) -> None:
    await ask(tg, OWNER, "remind me", {"action": "create", "text": "buy milk", "in_minutes": 30})
    await ask(
        tg,
        OWNER,
        "and every 2 hours to stretch",
        {"action": "create", "text": "stretch", "every": "2h"},
    )
    await tg.send(OWNER, "/reminders")
    await tg.idle()
    listing = tg.server.sent_to(OWNER)[-1]
    assert listing.text.startswith("Your reminders and tasks (times in UTC):")
    assert "#1 reminder · once at " in listing.text and "buy milk" in listing.text
    assert "#2 reminder · every 2 hours · next " in listing.text
    buttons = [b["callback_data"] for row in listing.reply_markup["inline_keyboard"] for b in row]
    assert buttons == [
        "reminders:pause:1",
        "reminders:cancel:1",
        "reminders:pause:2",
        "reminders:cancel:2",
    ]

    await tg.press(OWNER, "reminders:cancel:1")
    await tg.idle()
    assert [j.status for j in await all_jobs(tg)] == ["cancelled", "active"]
    answers = [c.params for c in tg.server.calls if c.method == "answerCallbackQuery"]
    assert answers[-1].get("text") == "Cancelled #1."
    edited = tg.server.sent_to(OWNER)[-1]
    assert "buy milk" not in edited.text and "stretch" in edited.text

    await tg.press(OWNER, "reminders:pause:2")
    await tg.idle()
    assert "paused" in tg.server.sent_to(OWNER)[-1].text
    await tg.press(OWNER, "reminders:resume:2")
    await tg.idle()
    assert [j.status for j in await all_jobs(tg)] == ["cancelled", "active"]

    # One run fires; the history shows it with its status.
    [_, stretch] = await all_jobs(tg)
    assert stretch.next_run_at is not None
    env = make_env(tg, stretch.next_run_at)
    assert await env.tick_at(stretch.next_run_at) == ["⏰ stretch"]
    await tg.send(OWNER, "/reminders history")
    await tg.idle()
    history = tg.server.sent_to(OWNER)[-1].text
    assert history.startswith("Last 1 runs (times in UTC):")
    assert "✅ #2 " in history and "sent · stretch" in history


async def test_another_users_job_is_refused_by_tool_and_button(tg: TG) -> None:
    await ask(tg, OWNER, "remind me", {"action": "create", "text": "secret plan", "in_minutes": 5})
    result = await ask(tg, OTHER, "cancel reminder 1", {"action": "cancel", "job_id": 1})
    assert result == "Error: there is no reminder or task #1 (see list for the ids)"
    result = await ask(tg, OTHER, "what do I have", {"action": "list"})
    assert result == "No reminders or tasks scheduled." and "secret plan" not in result
    await tg.send(OTHER, "/reminders")
    await tg.idle()
    mine = tg.server.sent_to(OTHER)[-1]
    assert mine.text.startswith("No reminders or tasks.") and mine.reply_markup is None
    await tg.press(OTHER, "reminders:cancel:1", message_id=mine.message_id)
    await tg.idle()
    answers = [c.params for c in tg.server.calls if c.method == "answerCallbackQuery"]
    assert answers[-1].get("text") == "There is no reminder #1."
    assert [j.status for j in await all_jobs(tg)] == ["active"]


async def test_idle_minutes_never_call_the_model(tg: TG) -> None:
    await ask(tg, OWNER, "remind me", {"action": "create", "text": "tea", "in_minutes": 60})
    calls = len(tg.llm.requests)
    env = make_env(tg, datetime.now(NY))
    reminders: ReminderJobs = env.reminders
    for minute in range(30):
        report = await reminders.tick()
        env.clock.set(env.clock() + timedelta(minutes=1))
        assert report.sent == 0, minute
    assert len(tg.llm.requests) == calls
