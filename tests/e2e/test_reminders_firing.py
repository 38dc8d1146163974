"""Firing and delivery: catch-up after downtime, the misfire window, quiet hours, Telegram
failures (429, 5xx, 403, 400), scheduled tasks through the agent, and 1,000 at once."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select

from bot.telegram.delivery import TelegramDelivery
from tests.e2e.conftest import OWNER, TG
from tests.e2e.reminders_env import MINUTE, make_env
from tests.fakes.openai_server import Error, Text
from tools.base import ToolError
from tools.reminders import jobs
from tools.reminders.doctor import reminder_checks
from tools.reminders.models import ScheduledJob

BERLIN = "Europe/Berlin"
# Friday 2026-11-20, 05:00 UTC = 06:00 in Berlin.
FRIDAY = datetime(2026, 11, 20, 5, 0, tzinfo=UTC)


async def test_catch_up_after_two_days_down(tg: TG) -> None:
    env = make_env(tg, FRIDAY)
    user = await env.user(OWNER, BERLIN)
    once = await env.job(user, BERLIN, "call the dentist", at="2026-11-20 07:00")
    daily = await env.job(user, BERLIN, "vitamins", daily_at="07:00")
    hourly = await env.job(user, BERLIN, "stand up", every="1h", at="2026-11-20 06:30")
    assert await env.tick_at(FRIDAY + timedelta(minutes=29)) == []
    assert await env.tick_at(FRIDAY + timedelta(minutes=30)) == ["⏰ stand up"]
    # Down from Friday 06:30 to Sunday 09:07 (local): every job fires once, late.
    got = await env.tick_at(datetime(2026, 11, 22, 8, 7, tzinfo=UTC))
    assert sorted(got) == [
        "⏰ call the dentist\n(late: was due Fri 2026-11-20 07:00)",
        "⏰ stand up\n(late: was due 08:30; 49 earlier runs missed while I was down)",
        "⏰ vitamins\n(late: was due 07:00; 2 earlier runs missed while I was down)",
    ]
    # Nothing twice: the next minute and a restart's startup tick deliver nothing more.
    assert await env.tick_at(datetime(2026, 11, 22, 8, 8, tzinfo=UTC)) == []
    await tg.restart()
    env2 = make_env(tg, datetime(2026, 11, 22, 8, 9, tzinfo=UTC))
    assert await env2.tick_at(env2.clock()) == []
    assert [len(await env.runs(j.id)) for j in (once, daily, hourly)] == [1, 1, 2]
    assert (await env.get_job(once.id)).status == "done"
    nxt = (await env.get_job(daily.id)).next_run_at
    assert nxt == datetime(2026, 11, 23, 6, 0, tzinfo=UTC)  # Monday 07:00 CET


async def test_recurring_run_beyond_the_misfire_window_is_skipped_not_sent(tg: TG) -> None:
    env = make_env(tg, FRIDAY, reminder_misfire_hours=12)
    user = await env.user(OWNER, BERLIN)
    weekly = await env.job(user, BERLIN, "team call", daily_at="09:00", days="fri")
    once = await env.job(user, BERLIN, "passport", at="2026-11-20 09:00")
    got = await env.tick_at(datetime(2026, 11, 22, 8, 0, tzinfo=UTC))  # Sunday
    assert got == ["⏰ passport\n(late: was due Fri 2026-11-20 09:00)"]  # one-shots never drop
    [run] = await env.runs(weekly.id)
    assert run.status == "skipped" and run.message_id is None
    assert "by more than 12 hours" in (run.error or "")
    assert (await env.get_job(weekly.id)).next_run_at == datetime(2026, 11, 27, 8, tzinfo=UTC)
    assert [r.status for r in await env.runs(once.id)] == ["sent"]


async def test_quiet_hours_hold_reminders_but_tasks_compute_on_time(tg: TG) -> None:
    env = make_env(tg, datetime(2026, 11, 20, 20, 0, tzinfo=UTC))  # 21:00 Berlin
    user = await env.user(OWNER, BERLIN)
    await tg.send(OWNER, "/quiet 22:00-07:00")
    assert "Quiet hours: 22:00-07:00" in (await tg.reply(OWNER)).text
    await env.job(user, BERLIN, "take out the bins", at="2026-11-20 23:00")
    await env.job(user, BERLIN, "summarise the news", kind="task", at="2026-11-20 23:00")
    tg.llm.add(Text("Here is the news summary."))
    assert await env.tick_at(datetime(2026, 11, 20, 22, 0, tzinfo=UTC)) == []
    # The task's answer was computed at 23:00 (the model was asked), but is held.
    assert "summarise the news" in str(tg.llm.requests[-1]["messages"][-1])
    assert await env.tick_at(datetime(2026, 11, 21, 5, 59, tzinfo=UTC)) == []
    got = await env.tick_at(datetime(2026, 11, 21, 6, 0, tzinfo=UTC))  # 07:00 Berlin
    assert got == [
        "⏰ take out the bins\n(held for your quiet hours: was due Fri 2026-11-20 23:00)",
        "Here is the news summary.\n(held for your quiet hours: was due Fri 2026-11-20 23:00)",
    ]
    await tg.send(OWNER, "/quiet off")
    await tg.idle()
    assert "Quiet hours off" in tg.server.sent_to(OWNER)[-1].text


async def test_telegram_429_then_success_waits_as_told(tg: TG) -> None:
    env = make_env(tg, FRIDAY)
    user = await env.user(OWNER, BERLIN)
    job = await env.job(user, BERLIN, "stretch", at="2026-11-20 06:30")
    tg.server.fail_next("sendMessage", 429, retry_after=3)
    assert await env.tick_at(FRIDAY + timedelta(minutes=30)) == ["⏰ stretch"]
    told, sent = [c for c in tg.server.calls if c.method == "sendMessage"]
    assert (told.status, sent.status) == (429, 200)
    assert sent.at - told.at >= 2.95  # by the fake's clock: the 3 s Telegram asked for
    [run] = await env.runs(job.id)
    assert run.status == "sent" and run.message_id == tg.server.messages[-1].message_id


async def test_delivery_counts_only_with_a_message_id(tg: TG) -> None:
    env = make_env(tg, FRIDAY, reminder_delivery_attempts=3)
    user = await env.user(OWNER, BERLIN)
    job = await env.job(user, BERLIN, "stretch", at="2026-11-20 06:30")
    due = FRIDAY + timedelta(minutes=30)
    # Telegram does not take it at first: the outbox's courier tries again until it does.
    tg.server.fail_next("sendMessage", 502, times=2)
    assert await env.tick_at(due) == ["⏰ stretch"]
    [run] = await env.runs(job.id)
    assert (run.status, run.attempts) == ("sent", 1)
    assert run.message_id == tg.server.messages[-1].message_id
    # A message Telegram refuses for good (400) is delivery_failed at once, with no id.
    job2 = await env.job(user, BERLIN, "gone", at="2026-11-20 08:00")
    tg.server.fail_next("sendMessage", 400)
    assert await env.tick_at(datetime(2026, 11, 20, 7, 0, tzinfo=UTC)) == []
    [run2] = await env.runs(job2.id)
    assert (run2.status, run2.message_id) == ("delivery_failed", None)
    checks = await reminder_checks(tg.app.session_factory, env.clock())
    assert [c.ok for c in checks] == [True, False]
    assert (
        "1 run(s) not delivered" in checks[1].detail and "scripted failure 400" in checks[1].detail
    )


async def test_blocked_bot_pauses_the_users_jobs_and_logs_once(
    tg: TG, caplog: pytest.LogCaptureFixture
) -> None:
    env = make_env(tg, FRIDAY)
    user = await env.user(OWNER, BERLIN)
    daily = await env.job(user, BERLIN, "vitamins", daily_at="06:30")
    other = await env.job(user, BERLIN, "water", at="2026-11-20 06:30")
    tg.server.fail_next("sendMessage", 403)
    with caplog.at_level(logging.WARNING, logger="tools.reminders.firing"):
        assert await env.tick_at(FRIDAY + timedelta(minutes=30)) == []
        for day in range(1, 4):
            assert await env.tick_at(FRIDAY + timedelta(days=day, minutes=30)) == []
    blocked = [r for r in caplog.records if "blocked the bot" in r.getMessage()]
    assert len(blocked) == 1 and "paused their 1 active job(s)" in blocked[0].getMessage()
    assert [c.status for c in tg.server.calls if c.method == "sendMessage"] == [403]
    statuses = sorted(r.status for r in await env.runs())
    assert statuses == ["delivery_failed", "delivery_failed"]
    row = await env.get_job(daily.id)
    assert (row.status, row.paused_reason) == ("paused", "blocked")
    assert (await env.get_job(other.id)).status == "done"  # a one-shot: its run is recorded
    await tg.send(OWNER, "/reminders")
    assert "paused (the bot was blocked)" in (await tg.reply(OWNER)).text


async def test_task_runs_the_agent_and_a_failing_task_tells_once(tg: TG) -> None:
    env = make_env(tg, FRIDAY)
    user = await env.user(OWNER, BERLIN)
    job = await env.job(user, BERLIN, "weather in Berlin", kind="task", daily_at="07:00")
    tg.llm.add(Text("Sunny, **12°C**."))
    day1 = datetime(2026, 11, 20, 6, 0, tzinfo=UTC)
    assert await env.tick_at(day1) == ["Sunny, 12°C."]  # Markdown rendered as entities
    assert tg.server.messages[-1].entities[0]["type"] == "bold"
    fail = [Error(500, "upstream broke")] * 3  # the client retries twice (MAX_RETRIES=2 in tests)
    tg.llm.add(*fail)
    [notice] = await env.tick_at(day1 + timedelta(days=1))
    assert notice.startswith(f"⚠️ Your scheduled task #{job.id} failed: ")
    assert "It stays scheduled" in notice
    tg.llm.add(*fail)
    assert await env.tick_at(day1 + timedelta(days=2)) == []  # same streak: not told again
    tg.llm.add(Text("Rain."))
    assert await env.tick_at(day1 + timedelta(days=3)) == ["Rain."]
    runs = await env.runs(job.id)
    assert [r.status for r in runs] == ["sent", "failed", "failed", "sent"]
    assert [r.message_id is not None for r in runs] == [True, True, False, True]
    assert (await env.get_job(job.id)).status == "active"


async def test_a_thousand_reminders_in_one_minute_all_arrive_in_order(tg: TG) -> None:
    env = make_env(tg, FRIDAY)
    chats = list(range(2000, 2050))
    users = {chat: await env.user(chat, BERLIN) for chat in chats}
    for n in range(20):
        for chat in chats:
            await env.job(users[chat], BERLIN, f"{chat} #{n:02d}", at="2026-11-20 06:30")
    got = await env.tick_at(FRIDAY + timedelta(minutes=30))
    assert len(got) == 1000 and len(set(got)) == 1000
    for chat in chats:
        texts = [m.text for m in tg.server.sent_to(chat)]
        assert texts == [f"⏰ {chat} #{n:02d}" for n in range(20)]
    assert {r.status for r in await env.runs()} == {"sent"}
    async with tg.app.session_factory() as s:
        left = (await s.execute(select(ScheduledJob.status).distinct())).scalars().all()
    assert left == ["done"]


async def test_cancelling_a_held_reminder_drops_its_waiting_run(tg: TG) -> None:
    env = make_env(tg, datetime(2026, 11, 20, 20, 0, tzinfo=UTC))
    user = await env.user(OWNER, BERLIN)
    await tg.send(OWNER, "/quiet 22:00-07:00")
    await tg.idle()
    daily = await env.job(user, BERLIN, "bins", daily_at="23:00")
    once = await env.job(user, BERLIN, "letter", at="2026-11-20 23:00")
    assert await env.tick_at(datetime(2026, 11, 20, 22, 0, tzinfo=UTC)) == []
    # The one-shot came due but waits for the morning: still listed, and cancellable.
    lines = [
        jobs.job_line(j, env.clock()) for j in await jobs.listing(tg.app.session_factory, user)
    ]
    assert any(f"#{once.id} reminder" in x and "due, waiting to be delivered" in x for x in lines)
    sf = tg.app.session_factory
    with pytest.raises(ToolError, match="can only be cancelled"):
        await jobs.change(sf, user_id=user, job_id=once.id, action="pause", now=env.clock())
    for job in (daily, once):
        await jobs.change(sf, user_id=user, job_id=job.id, action="cancel", now=env.clock())
    assert await env.tick_at(datetime(2026, 11, 21, 6, 0, tzinfo=UTC)) == []
    for job in (daily, once):
        [run] = await env.runs(job.id)
        assert (run.status, run.error) == ("skipped", "cancelled by the user")
    assert await jobs.listing(sf, user) == []


@pytest.mark.parametrize("kind", ["reminder", "task"])
async def test_a_run_claimed_before_a_crash_is_delivered_once_after_restart(
    tg: TG, kind: str
) -> None:
    env = make_env(tg, FRIDAY)
    user = await env.user(OWNER, BERLIN)
    job = await env.job(user, BERLIN, "pills", kind=kind, at="2026-11-20 06:30")
    env.clock.set(FRIDAY + timedelta(minutes=30))
    assert await env.reminders.claim(env.clock()) == 1  # claimed, then the process died
    assert [r.status for r in await env.runs(job.id)] == ["pending"]
    await tg.restart()
    tg.llm.add(Text("Take the blue one."))
    after = make_env(tg, FRIDAY + timedelta(minutes=45))
    expected = "⏰ pills" if kind == "reminder" else "Take the blue one."
    assert await after.tick_at(after.clock()) == [expected]
    assert await after.tick_at(after.clock() + MINUTE) == []
    [run] = await env.runs(job.id)
    assert run.status == "sent" and run.due_at == FRIDAY + timedelta(minutes=30)


async def test_the_real_scheduler_delivers_at_startup(tg: TG) -> None:
    from scheduler.setup import Scheduler

    env = make_env(tg, datetime.now(UTC) - timedelta(hours=3))  # the bot was down since
    user = await env.user(OWNER, BERLIN)
    job = await env.job(user, BERLIN, "late one", in_minutes=1)
    # The features' jobs, as `sidekick run` starts them.
    scheduler = Scheduler(await tg.app.start_features(TelegramDelivery(tg.runtime.outbox)))
    assert "reminders" in scheduler.next_runs()
    scheduler.start()
    try:
        await tg.server.wait_for(lambda: len(tg.server.messages) >= 1)
    finally:
        await scheduler.stop()
    assert tg.server.messages[0].text.startswith("⏰ late one\n(late: was due ")
    assert [r.status for r in await env.runs(job.id)] == ["sent"]
