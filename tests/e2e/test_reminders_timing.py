"""Reminders on time: the scheduler ticks on whole minutes (also after the startup run),
and a delivery retry lands on the tick it was meant for, not one minute later."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from bot.telegram.reminder_delivery import TelegramDelivery
from scheduler.setup import Scheduler
from tests.e2e.conftest import OWNER, TG
from tests.e2e.reminders_env import MINUTE, Clock, Env
from tools.reminders.firing import ReminderJobs
from tools.reminders.settings import ReminderSettings

BERLIN = "Europe/Berlin"
FRIDAY = datetime(2026, 11, 20, 5, 0, tzinfo=UTC)


async def test_the_minute_tick_stays_on_whole_minutes_after_the_startup_run() -> None:
    ran = asyncio.Event()

    async def job() -> None:
        ran.set()

    scheduler = Scheduler([("tick", "a minute job", timedelta(minutes=1), job)])
    scheduler.start()
    try:
        await asyncio.wait_for(ran.wait(), 60)  # the startup run
        for _ in range(600):  # APScheduler computes the next run right after the first
            [info] = scheduler.job_infos()
            if info.next_run is not None and info.next_run > datetime.now(UTC):
                break
            await asyncio.sleep(0.05)
        [info] = scheduler.job_infos()
        assert info.next_run is not None
        assert (info.next_run.second, info.next_run.microsecond) == (0, 0), info.next_run
        assert info.next_run - datetime.now(UTC) <= timedelta(minutes=1)
    finally:
        await scheduler.stop()


async def test_a_delivery_retry_goes_out_on_the_next_tick_not_one_later(tg: TG) -> None:
    clock = Clock(FRIDAY)

    async def sleep(seconds: float) -> None:  # Telegram's backoff passes on the clock
        clock.set(clock.now + timedelta(seconds=seconds))

    reminders = ReminderJobs(
        session_factory=tg.app.session_factory,
        deliver=TelegramDelivery(tg.runtime.bot, sleep=sleep),
        run_task=tg.app.ask,
        clock=clock,
        settings=ReminderSettings(reminder_delivery_attempts=3),
    )
    env = Env(tg, clock, reminders)
    user = await env.user(OWNER, BERLIN)
    job = await env.job(user, BERLIN, "stretch", at="2026-11-20 06:30")
    due = FRIDAY + timedelta(minutes=30)
    tg.server.fail_next("sendMessage", 502, times=4)  # one attempt: its retries take seconds
    assert await env.tick_at(due) == []
    [run] = await env.runs(job.id)
    assert run.status == "pending" and clock.now > due  # the failed send ended past the tick
    # The first retry is due one minute later: the tick at that minute delivers it.
    assert await env.tick_at(due + MINUTE) == ["⏰ stretch"]
