"""Reminders on time: the scheduler ticks on whole minutes (also after the startup run),
a reminder fires on its second, and one due in a Telegram outage goes out once it is back,
through the outbox's courier."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from sqlalchemy import select

from bot.telegram.delivery import TelegramDelivery
from db.repos.core import get_or_create_user
from scheduler.setup import Scheduler
from tests.e2e.conftest import OWNER, TG
from tests.e2e.reminders_env import make_env
from tools.reminders import jobs
from tools.reminders.firing import REMINDERS
from tools.reminders.models import JobRun
from tools.reminders.times import Spec

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
            next_run = scheduler.next_runs()["tick"]
            if next_run is not None and next_run > datetime.now(UTC):
                break
            await asyncio.sleep(0.05)
        next_run = scheduler.next_runs()["tick"]
        assert next_run is not None
        assert (next_run.second, next_run.microsecond) == (0, 0), next_run
        assert next_run - datetime.now(UTC) <= timedelta(minutes=1)
    finally:
        await scheduler.stop()


async def test_a_reminder_due_in_a_telegram_outage_goes_out_when_it_is_back(tg: TG) -> None:
    """Through the outbox's courier, within its next try after the outage (seconds), not at
    a scheduler tick a minute or more later."""
    tg.runtime.outbox.probe_max_s = 0.2  # the courier's tries, close together for the test
    env = make_env(tg, FRIDAY)
    user = await env.user(OWNER, BERLIN)
    job = await env.job(user, BERLIN, "stretch", at="2026-11-20 06:30")
    await tg.server.wait_for(lambda: any(c.method == "getUpdates" for c in tg.server.calls))
    tg.server.down(502)
    tick = asyncio.create_task(env.tick_at(FRIDAY + timedelta(minutes=30)))

    def tries() -> int:
        return sum(c.method == "sendMessage" and c.status == 502 for c in tg.server.calls)

    await tg.server.wait_for(lambda: tries() >= 6 or tick.done())
    assert not tick.done(), "the delivery gave up during the outage"
    tg.server.up()
    assert await tick == ["⏰ stretch"]  # the same tick: no later one was needed
    [run] = await env.runs(job.id)
    assert run.status == "sent" and run.message_id == tg.server.messages[-1].message_id


async def test_a_reminder_fires_on_its_second_not_at_the_next_minute_tick(tg: TG) -> None:
    """A reminder set for a few seconds ahead goes out then, by the alarm the minute job
    armed at start-up and the new reminder re-armed; the minute job does not run between
    (its next run stays where it was), so it was not the minute tick that sent it."""
    env = make_env(tg, datetime.now(UTC))
    user = await env.user(OWNER, BERLIN)
    scheduler = Scheduler(await tg.app.start_features(TelegramDelivery(tg.runtime.outbox)))
    scheduler.start()

    async def next_tick(after: datetime) -> datetime:
        """The minute job's next run, once it is later than `after`."""
        for _ in range(2400):  # two minutes at most: a loaded machine is slow
            tick = scheduler.next_runs()["reminders"]
            if tick is not None and tick > after:
                return tick
            await asyncio.sleep(0.05)
        raise AssertionError(f"the minute job did not run by {after} (next run {tick})")

    try:
        # The start-up run (it arms the alarm) is over once the next run is on the grid.
        tick = await next_tick(datetime.now(UTC))
        # Room before that minute tick for the reminder's few seconds (the machine may be
        # slow: the reminder is due 3 s after it is made, the minute tick is >= 25 s
        # away); too close, and the reminder is made after that tick has run.
        if tick - datetime.now(UTC) < timedelta(seconds=25):
            tick = await next_tick(tick)
        now = datetime.now(UTC)
        due = now + timedelta(seconds=3)
        job = await jobs.create(
            tg.app.session_factory,
            user_id=user,
            kind="reminder",
            text="tea is ready",
            words="in 3 seconds",
            spec=Spec("at", ZoneInfo(BERLIN), first=due),
            now=now,
        )
        await tg.server.wait_for(lambda: len(tg.server.messages) >= 1, timeout=120)
        after = scheduler.next_runs()["reminders"]
        for _ in range(1200):  # the ledger is written just after the send
            [run] = await env.runs(job.id)
            if run.status != "pending":
                break
            await asyncio.sleep(0.05)
    finally:
        await scheduler.stop()
    assert [m.text for m in tg.server.messages] == ["⏰ tea is ready"]
    assert after == tick  # the minute tick did not run: the alarm sent it
    assert run.status == "sent" and run.due_at == due


async def test_the_apps_own_reminders_wait_out_an_outage_in_the_courier(tg: TG) -> None:
    """The same, with the reminders part `sidekick run` starts (its deliveries as the app
    wires them): the reminder due in the outage is sent on the courier's next try after it,
    by the tick that found it due, not left for a later one."""
    tg.runtime.outbox.probe_max_s = 0.2  # the courier's tries, close together for the test
    await tg.app.start_features(TelegramDelivery(tg.runtime.outbox))  # as `sidekick run` does
    now = datetime.now(UTC).replace(microsecond=0)
    async with tg.app.session_factory() as s, s.begin():
        user = await get_or_create_user(s, OWNER, "Owner", now)
    spec = Spec("at", ZoneInfo("UTC"), first=now - timedelta(seconds=5))
    job = await jobs.create(
        tg.app.session_factory, user_id=user.id, kind="reminder", text="stretch", words="",
        spec=spec, now=now - timedelta(minutes=1),
    )  # fmt: skip
    await tg.server.wait_for(lambda: any(c.method == "getUpdates" for c in tg.server.calls))
    tg.server.down(502)
    tick = asyncio.create_task(tg.app.part(REMINDERS).tick())

    def tries() -> int:
        return sum(c.method == "sendMessage" and c.status == 502 for c in tg.server.calls)

    await tg.server.wait_for(lambda: tries() >= 6 or tick.done())
    assert not tick.done(), "the delivery gave up during the outage"
    tg.server.up()
    await tick
    async with tg.app.session_factory() as s:
        (run,) = (await s.scalars(select(JobRun).where(JobRun.job_id == job.id))).all()
    assert run.status == "sent" and run.message_id == tg.server.messages[-1].message_id
    assert tg.server.messages[-1].text == "⏰ stretch"
