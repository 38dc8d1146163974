"""Cost of reminders: the per-minute due check, and a burst of due reminders.

Builds a temp database with 10,000 jobs over 1,000 users (reminders at daily, weekday and
one-shot times spread over the coming week, in a few time zones), then times:
1. the per-minute check with nothing due (what the bot pays every minute, forever);
2. 1,000 reminders due in the same minute, delivered through the real aiogram Bot to the
   fake Telegram on 127.0.0.1: reminders per second, and the bot's own CPU per reminder
   (process CPU minus the fake server's handler time, which shares the process).

Usage: python bench/reminders.py [--users 1000] [--jobs 10000] [--due 1000]
"""

from __future__ import annotations

import asyncio
import logging
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sqlalchemy import insert, update

from bench.cli import options
from bot.telegram.delivery import TelegramDelivery
from bot.telegram.dispatcher import build_bot
from bot.telegram.outbox import Outbox
from db.engine import create_engine, session_factory
from db.migrate import upgrade
from db.models.core import User
from db.repos.core import Recipient
from tests.conftest import make_settings
from tests.fakes.telegram_server import FakeTelegram
from tools.reminders.firing import ReminderJobs
from tools.reminders.models import ScheduledJob
from tools.reminders.settings import ReminderSettings

ZONES = ["Europe/Berlin", "America/New_York", "Asia/Tokyo", "UTC"]


async def no_task(recipient: Recipient, prompt: str) -> str:
    raise RuntimeError("the benchmark schedules no tasks")


async def main(users: int, jobs: int, due: int, concurrency: int) -> None:
    logging.disable(logging.INFO)
    server = await FakeTelegram().start()
    now = [datetime(2026, 11, 20, 12, 0, tzinfo=UTC)]
    with tempfile.TemporaryDirectory() as tmp:
        settings = make_settings(
            Path(tmp), telegram_bot_token=server.token, telegram_api_url=server.base_url
        )
        engine = create_engine(settings.db_url)
        await upgrade(engine)
        sf = session_factory(engine)
        t = time.perf_counter()
        async with sf() as s, s.begin():
            await s.execute(
                insert(User),
                [{"id": u + 1, "telegram_id": 100_000 + u, "name": f"u{u}",
                  "timezone": ZONES[u % len(ZONES)], "created_at": now[0]}
                 for u in range(users)],
            )  # fmt: skip
            rows: list[dict[str, Any]] = []
            for j in range(jobs):
                user = j % users + 1
                offset = timedelta(minutes=1 + (j * 7919) % (7 * 24 * 60))  # the coming week
                kind = ("at", "cron", "every")[j % 3]
                rows.append(
                    {"user_id": user, "kind": "reminder", "text": f"job {j}: water the plants",
                     "words": "", "schedule": kind, "timezone": ZONES[(user - 1) % len(ZONES)],
                     "first_at": now[0] + offset if kind != "cron" else None,
                     "every_s": 3600 * 24 if kind == "every" else None,
                     "at_time": "08:00" if kind == "cron" else None,
                     "days": 31 if kind == "cron" else 127, "status": "active",
                     "next_run_at": now[0] + offset, "created_at": now[0]}
                )  # fmt: skip
            await s.execute(insert(ScheduledJob), rows)
        print(f"setup: {users} users, {jobs} jobs in {time.perf_counter() - t:.1f} s")

        bot = build_bot(settings)
        reminders = ReminderJobs(
            session_factory=sf,
            deliver=TelegramDelivery(Outbox(bot, sf, lambda: now[0])),
            run_task=no_task,
            clock=lambda: now[0],
            settings=ReminderSettings(reminder_concurrency=concurrency),
        )
        for _ in range(5):  # warm up connections and caches
            await reminders.tick()
        samples = []
        for _ in range(200):
            t = time.perf_counter()
            report = await reminders.tick()
            samples.append((time.perf_counter() - t) * 1000)
            assert not report.busy()
        samples.sort()
        p95 = samples[int(len(samples) * 0.95)]
        print(
            f"due check, nothing due ({jobs} jobs): p50 {statistics.median(samples):.2f} ms, "
            f"p95 {p95:.2f} ms (target p50 <= 5 ms)"
        )

        # One job per user comes due in the same minute.
        async with sf() as s, s.begin():
            await s.execute(
                update(ScheduledJob),
                [{"id": i * (jobs // due) + 1, "next_run_at": now[0]} for i in range(due)],
            )
        calls_before = len(server.calls)
        cpu, t = time.process_time(), time.perf_counter()
        report = await reminders.tick()
        wall, cpu = time.perf_counter() - t, time.process_time() - cpu
        served = sum(c.duration for c in server.calls[calls_before:])
        assert report.sent == due and len(server.messages) == due, report
        print(
            f"{due} due at once: {report.sent} sent in {wall:.2f} s = {due / wall:.0f} "
            f"reminders/s (target >= 200/s); bot CPU {1000 * (cpu - served) / due:.2f} ms "
            f"per reminder (process CPU {1000 * cpu / due:.2f} ms minus the fake server's "
            f"{1000 * served / due:.2f} ms)"
        )
        await bot.session.close()
        await engine.dispose()
    await server.stop()


if __name__ == "__main__":
    a = options(__doc__, users=1000, jobs=10_000, due=1000,
                concurrency=ReminderSettings().reminder_concurrency)  # fmt: skip
    asyncio.run(main(a.users, a.jobs, a.due, a.concurrency))
