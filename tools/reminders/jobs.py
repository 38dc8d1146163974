"""Jobs as the user sees them: create, list, edit, cancel, pause, resume. Used by the
`schedule` tool, the /reminders command and the dashboard alike; every change checks the
job is the user's own."""

from __future__ import annotations

from datetime import datetime, time
from typing import Literal
from zoneinfo import ZoneInfo

from sqlalchemy.ext.asyncio import AsyncSession

from db.engine import SessionFactory
from tools.base import ToolError
from tools.reminders import repo as repo
from tools.reminders.changes import changed
from tools.reminders.models import ScheduledJob
from tools.reminders.times import Spec, describe, first_run, local_text, next_after

Change = Literal["cancel", "pause", "resume"]
DONE = {"cancel": "Cancelled", "pause": "Paused", "resume": "Resumed"}
MAX_LIVE_JOBS = 200
MAX_TEXT = 2000
MIN_TASK_EVERY_S = 15 * 60  # a task calls the model each time: not more often than this


def spec_of(job: ScheduledJob) -> Spec:
    tz = ZoneInfo(job.timezone)
    if job.schedule == "cron":
        assert job.at_time is not None
        return Spec("cron", tz, at_time=time.fromisoformat(job.at_time), days=job.days)
    if job.schedule == "every":
        return Spec("every", tz, first=job.first_at, every_s=job.every_s)
    return Spec("at", tz, first=job.first_at)


def job_line(job: ScheduledJob, now: datetime) -> str:
    """'#12 reminder · daily at 08:00 on weekdays · next Tue 2026-11-24 08:00 · take pills'."""
    spec = spec_of(job)
    if job.status == "paused":
        why = {"blocked": " (the bot was blocked)", "removed": " (you were removed)"}.get(
            job.paused_reason or "", ""
        )
        when = f"paused{why}"
    elif job.status == "done":
        when = "due, waiting to be delivered"
    elif job.next_run_at is None:
        when = job.status
    else:
        when = f"next {local_text(job.next_run_at, spec.tz, now)}"
    text = job.text if len(job.text) <= 120 else job.text[:119] + "…"
    return f"#{job.id} {job.kind} · {describe(spec)} · {when} · {text}"


def _text(text: str, action: str) -> str:
    text = text.strip()
    if not text:
        raise ToolError(f"{action} needs `text`: what to remind the user of, or the task to run")
    if len(text) > MAX_TEXT:
        raise ToolError(f"text is too long (max {MAX_TEXT} characters)")
    return text


def _first(kind: str, spec: Spec, now: datetime) -> datetime:
    if kind == "task" and spec.every_s is not None and spec.every_s < MIN_TASK_EVERY_S:
        raise ToolError("a task runs the assistant each time: every 15 minutes at most")
    nxt = first_run(spec, now)
    if nxt is None:
        raise ToolError("that schedule never runs")
    return nxt


def new_job(kind: str, text: str, spec: Spec, now: datetime) -> tuple[str, datetime]:
    """A new job's text and first run, or the ToolError that refuses it (checked before
    the person is asked to allow it: tools/reminders/tool.py)."""
    return _text(text, "create"), _first(kind, spec, now)


async def create(
    sf: SessionFactory, *, user_id: int, kind: str, text: str, words: str, spec: Spec, now: datetime
) -> ScheduledJob:

    text, nxt = new_job(kind, text, spec, now)
    async with sf() as s, s.begin():
        if await repo.count_live(s, user_id) >= MAX_LIVE_JOBS:
            raise ToolError(
                f"the user has {MAX_LIVE_JOBS} reminders and tasks already: cancel some first"
            )
        job = await repo.add_job(
            s,
            user_id=user_id,
            kind=kind,
            text=text,
            words=words.strip()[:500],
            schedule=spec.kind,
            timezone=spec.tz.key,
            first_at=spec.first,
            every_s=spec.every_s,
            at_time=f"{spec.at_time:%H:%M}" if spec.at_time else None,
            days=spec.days,
            status="active",
            next_run_at=nxt,
            created_at=now,
        )
    changed(sf)
    return job


async def listing(sf: SessionFactory, user_id: int) -> list[ScheduledJob]:
    async with sf() as s:
        return await repo.live_jobs(s, user_id)


async def _live(s: AsyncSession, user_id: int, job_id: int, action: str) -> ScheduledJob:
    """The user's job that `action` may change; ToolError for anything else (another
    user's job id reads exactly like a job that does not exist)."""
    job = await repo.user_job(s, user_id, job_id)
    waiting = job is not None and job.status == "done" and await repo.has_waiting_run(s, job_id)
    if job is None or (job.status not in repo.LIVE and not waiting):
        raise ToolError(f"there is no reminder or task #{job_id} (see list for the ids)")
    if waiting and action != "cancel":
        raise ToolError(f"#{job_id} came due and waits to be delivered: it can only be cancelled")
    return job


async def edit(
    sf: SessionFactory,
    *,
    user_id: int,
    job_id: int,
    now: datetime,
    text: str | None = None,
    spec: Spec | None = None,
    words: str = "",
) -> ScheduledJob:
    """A new text and/or a new time for the user's job (the `schedule` tool's edit, the
    dashboard's form). The new time counts from now; a paused job keeps it for its resume."""
    if text is None and spec is None:
        raise ToolError("edit needs a new `text` or a new time (`when` and the time fields)")
    new_text = _text(text, "edit") if text is not None else None
    async with sf() as s, s.begin():
        job = await _live(s, user_id, job_id, "edit")
        if new_text is not None:
            job.text = new_text
        if spec is not None:
            job.next_run_at = _first(job.kind, spec, now)
            job.schedule, job.timezone, job.first_at = spec.kind, spec.tz.key, spec.first
            job.every_s, job.days = spec.every_s, spec.days
            job.at_time = f"{spec.at_time:%H:%M}" if spec.at_time else None
            job.words = words.strip()[:500]
        await s.flush()
    changed(sf)
    return job


async def change(
    sf: SessionFactory, *, user_id: int, job_id: int, action: Change, now: datetime
) -> ScheduledJob:
    """Cancel, pause or resume the user's job; ToolError for anything else (another
    user's job id reads exactly like a job that does not exist)."""
    async with sf() as s, s.begin():
        job = await _live(s, user_id, job_id, action)
        if action == "cancel":
            job.status, job.next_run_at = "cancelled", None
            await repo.end_pending(s, "skipped", "cancelled by the user", now, job_id=job.id)
        elif action == "pause":
            job.status = "paused"
        elif job.status == "paused":
            job.status, job.paused_reason = "active", None
            spec = spec_of(job)
            if spec.kind == "at":
                # A one-shot whose time passed while paused still runs (late), never lost.
                job.next_run_at = job.next_run_at or spec.first
            else:
                job.next_run_at = next_after(spec, now)
        await s.flush()
    changed(sf)
    return job
