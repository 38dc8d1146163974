"""Helpers for the reminder tests: a settable clock, users, jobs, and ReminderJobs wired to
the real aiogram Bot of a running `tg` (so delivery goes through the fake Telegram)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from sqlalchemy import select

from bot.sessions import repo as sessions_repo
from bot.telegram.delivery import TelegramDelivery
from db.repos import core as core_repo
from tests.e2e.conftest import TG
from tools.reminders import jobs
from tools.reminders.firing import ReminderJobs
from tools.reminders.models import JobRun, ScheduledJob
from tools.reminders.parse import Fields, build_spec
from tools.reminders.settings import ReminderSettings


@dataclass
class Clock:
    now: datetime

    def __call__(self) -> datetime:
        return self.now

    def set(self, when: datetime) -> None:
        self.now = when


@dataclass
class Env:
    tg: TG
    clock: Clock
    reminders: ReminderJobs

    async def user(self, telegram_id: int, tz: str = "Europe/Berlin") -> int:
        async with self.tg.app.session_factory() as s, s.begin():
            user = await core_repo.get_or_create_user(s, telegram_id, "Tester", self.clock())
            await sessions_repo.set_user_timezone(s, user.id, tz)
            return user.id

    async def job(
        self,
        user_id: int,
        tz: str,
        text: str = "drink water",
        *,
        kind: str = "reminder",
        when: str = "",
        **fields: Any,
    ) -> ScheduledJob:
        spec = build_spec(Fields(**fields), when, self.clock(), ZoneInfo(tz))
        return await jobs.create(
            self.tg.app.session_factory,
            user_id=user_id,
            kind=kind,
            text=text,
            words=when,
            spec=spec,
            now=self.clock(),
        )

    async def runs(self, job_id: int | None = None) -> list[JobRun]:
        stmt = select(JobRun).order_by(JobRun.id)
        if job_id is not None:
            stmt = stmt.where(JobRun.job_id == job_id)
        async with self.tg.app.session_factory() as s:
            return list((await s.execute(stmt)).scalars())

    async def get_job(self, job_id: int) -> ScheduledJob:
        async with self.tg.app.session_factory() as s:
            job = await s.get(ScheduledJob, job_id)
            assert job is not None
            return job

    async def tick_at(self, when: datetime) -> list[str]:
        """Set the clock, run one tick (and any task it started); the new messages' texts."""
        before = len(self.tg.server.messages)
        self.clock.set(when)
        await self.reminders.tick()
        await self.reminders.idle()
        return [m.text for m in self.tg.server.messages[before:]]


def make_env(tg: TG, start: datetime, **settings: Any) -> Env:
    clock = Clock(start)
    reminders = ReminderJobs(
        session_factory=tg.app.session_factory,
        deliver=TelegramDelivery(tg.runtime.outbox),
        run_task=tg.app.ask,
        clock=clock,
        settings=ReminderSettings(**settings),
    )
    return Env(tg, clock, reminders)


MINUTE = timedelta(minutes=1)
