"""How late reminders fire: the delay from each reminder's due time to its delivery.

Builds a temp database with one user and N one-shot reminders due at random seconds over
the next few minutes, runs the real scheduler with the reminders job (its start-up run,
the minute grid, and the alarm it arms), and records when each reminder reaches the
delivery callback. `--minute` runs the minute tick alone (how reminders fired before the
alarm): the delay is then up to a minute.

Usage: python bench/reminder_delay.py [--reminders 20] [--spread 150] [--minute]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import random
import statistics
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from db.engine import create_engine, session_factory
from db.migrate import upgrade
from db.repos import core as core_repo
from db.repos.core import Recipient
from scheduler.setup import Scheduler
from tests.conftest import make_settings
from tools.reminders import jobs
from tools.reminders.firing import EVERY, JOB_ID, ReminderJobs
from tools.reminders.times import Spec


async def no_task(recipient: Recipient, prompt: str) -> str:
    raise RuntimeError("the benchmark schedules no tasks")


async def main(count: int, spread: float, minute_only: bool) -> None:
    logging.disable(logging.INFO)
    delays: dict[str, float] = {}
    due_at: dict[str, datetime] = {}
    done = asyncio.Event()

    async def deliver(recipient: Recipient, text: str, markdown: bool) -> int:
        key = text.removeprefix("⏰ ").split("\n")[0]
        delays[key] = (datetime.now(UTC) - due_at[key]).total_seconds()
        if len(delays) == count:
            done.set()
        return len(delays)

    with tempfile.TemporaryDirectory() as tmp:
        settings = make_settings(Path(tmp))
        engine = create_engine(settings.db_url)
        await upgrade(engine)
        sf = session_factory(engine)
        now = datetime.now(UTC)
        async with sf() as s, s.begin():
            user = await core_repo.get_or_create_user(s, 4242, "bench", now)
        reminders = ReminderJobs(sf, deliver, no_task, lambda: datetime.now(UTC))

        async def fire() -> None:
            await reminders.tick()
            if not minute_only:
                reminders.arm()

        scheduler = Scheduler([(JOB_ID, "reminders", EVERY, fire)])
        scheduler.start()
        rng = random.Random(7)
        for i in range(count):
            when = datetime.now(UTC) + timedelta(seconds=5 + rng.random() * spread)
            due_at[f"r{i}"] = when
            await jobs.create(
                sf, user_id=user.id, kind="reminder", text=f"r{i}", words="",
                spec=Spec("at", ZoneInfo("UTC"), first=when), now=datetime.now(UTC),
            )  # fmt: skip
        try:
            await asyncio.wait_for(done.wait(), spread + 180)
        finally:
            await scheduler.stop()
            await reminders.stop()
            await engine.dispose()
    values = sorted(delays.values())
    mode = "minute tick only" if minute_only else "alarm + minute tick"
    print(
        f"{mode}: {len(values)} reminders, delay p50 {statistics.median(values):.2f} s, "
        f"max {values[-1]:.2f} s"
    )


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--reminders", type=int, default=20)
    ap.add_argument("--spread", type=float, default=150.0, help="seconds the due times span")
    ap.add_argument("--minute", action="store_true", help="no alarm: the minute tick alone")
    a = ap.parse_args()
    asyncio.run(main(a.reminders, a.spread, a.minute))
