"""Reminder jobs, their run ledger and quiet hours: every query the schedule feature runs."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from sqlalchemy import (
    ColumnElement,
    Table,
    and_,
    bindparam,
    exists,
    func,
    or_,
    select,
    update,
)
from sqlalchemy import text as sql
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.ext.asyncio import AsyncSession

from db.engine import is_postgres
from db.models.core import User
from db.repos.core import Recipient
from tools.reminders.models import JobRun, ReminderPrefs, ScheduledJob

LIVE = ("active", "paused")


def _audience(local: bool) -> ColumnElement[bool]:
    """Telegram users, or the terminal's local user (no Telegram id)."""
    return User.telegram_id.is_(None) if local else User.telegram_id.is_not(None)


@dataclass(frozen=True)
class Quiet:
    start: str
    end: str


async def add_job(s: AsyncSession, **values: Any) -> ScheduledJob:
    job = ScheduledJob(**values)
    s.add(job)
    await s.flush()
    return job


async def live_jobs(s: AsyncSession, user_id: int) -> list[ScheduledJob]:
    """The user's active and paused jobs, and one-shots that came due but still wait to be
    delivered (quiet hours, retry): soonest first."""
    stmt = (
        select(ScheduledJob)
        .where(
            ScheduledJob.user_id == user_id,
            or_(
                ScheduledJob.status.in_(LIVE),
                and_(ScheduledJob.status == "done", _waiting(ScheduledJob.id)),
            ),
        )
        .order_by(ScheduledJob.status, ScheduledJob.next_run_at, ScheduledJob.id)
    )
    return list((await s.execute(stmt)).scalars())


def _waiting(job_id: Any) -> ColumnElement[bool]:
    return exists().where(JobRun.job_id == job_id, JobRun.status == "pending")


async def has_waiting_run(s: AsyncSession, job_id: int) -> bool:
    return bool((await s.execute(select(_waiting(job_id)))).scalar())


async def count_live(s: AsyncSession, user_id: int) -> int:
    stmt = select(func.count()).where(
        ScheduledJob.user_id == user_id, ScheduledJob.status.in_(LIVE)
    )
    return int((await s.execute(stmt)).scalar_one())


async def user_job(s: AsyncSession, user_id: int, job_id: int) -> ScheduledJob | None:
    """The job if it exists AND belongs to this user; another user's id is None."""
    job = await s.get(ScheduledJob, job_id)
    return job if job is not None and job.user_id == user_id else None


async def due_jobs(
    s: AsyncSession, now: datetime, *, local: bool
) -> list[tuple[ScheduledJob, Quiet | None]]:
    """Active jobs whose next run is at or before now (one indexed range scan), each with
    its user's quiet hours."""
    stmt = (
        select(ScheduledJob, ReminderPrefs.quiet_start, ReminderPrefs.quiet_end)
        .join(User, User.id == ScheduledJob.user_id)
        .outerjoin(ReminderPrefs, ReminderPrefs.user_id == ScheduledJob.user_id)
        .where(
            ScheduledJob.status == "active",
            ScheduledJob.next_run_at <= now,
            _audience(local),
        )
        .order_by(ScheduledJob.next_run_at, ScheduledJob.id)
    )
    rows = (await s.execute(stmt)).all()
    return [(job, Quiet(qs, qe) if qs and qe else None) for job, qs, qe in rows]


async def first_due(s: AsyncSession, after: datetime | None = None) -> datetime | None:
    """The first moment a job comes due or a pending run may be delivered: the per-minute
    check in one round trip over two indexes (nothing else runs when idle). With `after`,
    the first one after it (when the alarm fires next), leaving out a task's run still
    being computed (no text yet): it is delivered when its computation ends."""
    jobs = ScheduledJob.__table__
    runs = JobRun.__table__
    job_due, run_due = [jobs.c.status == "active"], [runs.c.status == "pending"]
    if after is not None:
        job_due.append(jobs.c.next_run_at > after)
        run_due += [runs.c.deliver_after > after, runs.c.text.is_not(None)]
    stmt = select(
        select(func.min(jobs.c.next_run_at)).where(*job_due).scalar_subquery(),
        select(func.min(runs.c.deliver_after)).where(*run_due).scalar_subquery(),
    )
    row = (await s.execute(stmt)).one()
    return min((at for at in row if at is not None), default=None)


async def take_tick_lock(s: AsyncSession, key: int) -> bool:
    """On PostgreSQL, the advisory lock `key` for the rest of the caller's transaction,
    if no other session holds it (the scheduler's guard takes the same key around the
    minute tick: one worker fires at a time). SQLite serves one process: always True."""
    if not is_postgres(s):
        return True
    got = await s.execute(sql("SELECT pg_try_advisory_xact_lock(:k)"), {"k": key})
    return bool(got.scalar())


async def _update_by_id(s: AsyncSession, table: Any, rows: list[dict[str, Any]]) -> None:
    """UPDATE ... WHERE id = ? as executemany, one statement per set of columns."""
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for row in rows:
        groups.setdefault(tuple(sorted(row)), []).append(row)
    for keys, group in groups.items():
        values: dict[str, Any] = {k: bindparam(f"v_{k}") for k in keys if k != "id"}
        stmt = update(table).where(table.c.id == bindparam("v_id")).values(values)
        await s.execute(stmt, [{f"v_{k}": v for k, v in row.items()} for row in group])


async def claim(s: AsyncSession, runs: list[dict[str, Any]], jobs: list[dict[str, Any]]) -> None:
    """Insert the claimed runs and move their jobs on, in the caller's transaction."""
    if runs:
        # ON CONFLICT DO NOTHING: a (job, due) pair already in the ledger was claimed
        # before; never twice. Both dialects spell it the same through their insert().
        table = cast(Table, JobRun.__table__)
        if is_postgres(s):
            # Imported here: the PostgreSQL dialect costs start-up time and memory,
            # which a SQLite bot never needs (on PostgreSQL the engine has loaded it).
            from sqlalchemy.dialects.postgresql import insert as pg_insert

            stmt: Any = pg_insert(table).on_conflict_do_nothing()
        else:
            stmt = sqlite_insert(table).on_conflict_do_nothing()
        await s.execute(stmt, runs)
    if jobs:
        await _update_by_id(s, ScheduledJob.__table__, jobs)


@dataclass(frozen=True)
class PendingRun:
    run_id: int
    job_id: int
    kind: str
    job_text: str
    text: str | None
    note: str | None
    outcome: str
    attempts: int
    recipient: Recipient


async def pending_runs(
    s: AsyncSession, now: datetime, *, local: bool, limit: int = 5000
) -> list[PendingRun]:
    """Runs to deliver whose time has come, and tasks still to compute (quiet hours hold
    a task's answer, not its computation), in delivery order."""
    stmt = (
        select(JobRun, ScheduledJob.kind, ScheduledJob.text, User)
        .join(ScheduledJob, ScheduledJob.id == JobRun.job_id)
        .join(User, User.id == JobRun.user_id)
        .where(
            JobRun.status == "pending",
            or_(JobRun.deliver_after <= now, JobRun.text.is_(None)),
            _audience(local),
        )
        .order_by(JobRun.due_at, JobRun.id)
        .limit(limit)
    )
    return [
        PendingRun(
            run_id=run.id,
            job_id=run.job_id,
            kind=kind,
            job_text=job_text,
            text=run.text,
            note=run.note,
            outcome=run.outcome,
            attempts=run.attempts,
            recipient=Recipient(user.id, user.telegram_id, user.name),
        )
        for run, kind, job_text, user in (await s.execute(stmt)).all()
    ]


async def finish_runs(s: AsyncSession, rows: list[dict[str, Any]]) -> None:
    """Bulk update of ledger rows by id (status, finished_at, message_id, error, ...)."""
    if rows:
        await _update_by_id(s, JobRun.__table__, rows)


async def set_run_text(s: AsyncSession, run_id: int, text: str, outcome: str = "sent") -> None:
    await s.execute(update(JobRun).where(JobRun.id == run_id).values(text=text, outcome=outcome))


async def previous_run_failed(s: AsyncSession, job_id: int, run_id: int) -> bool:
    """Whether the job's run before this one failed (a failure streak tells the user once)."""
    stmt = (
        select(JobRun.status)
        .where(JobRun.job_id == job_id, JobRun.id < run_id)
        .order_by(JobRun.id.desc())
        .limit(1)
    )
    return (await s.execute(stmt)).scalar_one_or_none() == "failed"


async def pause_user(s: AsyncSession, user_id: int, reason: str) -> int:
    """Pause every active job of the user; returns how many."""
    result = await s.execute(
        update(ScheduledJob)
        .where(ScheduledJob.user_id == user_id, ScheduledJob.status == "active")
        .values(status="paused", paused_reason=reason)
    )
    return int(result.rowcount)  # type: ignore[attr-defined]


async def end_pending(s: AsyncSession, status: str, error: str, now: datetime, **of: int) -> None:
    """End the runs still waiting (quiet hours, retry) of a user (`user_id=`: they blocked
    the bot) or of a job (`job_id=`: it was cancelled); they are not sent any more."""
    await s.execute(
        update(JobRun)
        .filter_by(status="pending", **of)
        .values(status=status, error=error, finished_at=now)
    )


@dataclass(frozen=True)
class RunLine:
    job_id: int
    text: str
    due_at: datetime
    status: str
    error: str | None


async def history(s: AsyncSession, user_id: int, limit: int = 15) -> list[RunLine]:
    """The user's newest runs, newest first."""
    stmt = (
        select(JobRun, ScheduledJob.text)
        .join(ScheduledJob, ScheduledJob.id == JobRun.job_id)
        .where(JobRun.user_id == user_id)
        .order_by(JobRun.id.desc())
        .limit(limit)
    )
    return [
        RunLine(r.job_id, text, r.due_at, r.status, r.error)
        for r, text in (await s.execute(stmt)).all()
    ]


async def get_quiet(s: AsyncSession, user_id: int) -> Quiet | None:
    row = await s.get(ReminderPrefs, user_id)
    if row is None or not row.quiet_start or not row.quiet_end:
        return None
    return Quiet(row.quiet_start, row.quiet_end)


async def set_quiet(s: AsyncSession, user_id: int, quiet: Quiet | None) -> None:
    row = await s.get(ReminderPrefs, user_id)
    if row is None:
        row = ReminderPrefs(user_id=user_id)
        s.add(row)
    row.quiet_start = quiet.start if quiet else None
    row.quiet_end = quiet.end if quiet else None
    await s.flush()


@dataclass(frozen=True)
class Overview:
    active: int
    paused: int
    next_due: datetime | None
    pending: int
    delivery_failed: list[tuple[int, datetime, str]]  # (run id, due, error), newest first


async def overview(s: AsyncSession, since: datetime) -> Overview:
    counts = dict(
        (await s.execute(select(ScheduledJob.status, func.count()).group_by(ScheduledJob.status)))
        .tuples()
        .all()
    )
    next_due = await s.scalar(
        select(func.min(ScheduledJob.next_run_at)).where(ScheduledJob.status == "active")
    )
    pending = await s.scalar(select(func.count()).where(JobRun.status == "pending"))
    stmt = (
        select(JobRun.id, JobRun.due_at, JobRun.error)
        .where(JobRun.status == "delivery_failed", JobRun.due_at >= since)
        .order_by(JobRun.id.desc())
        .limit(20)
    )
    failed = (await s.execute(stmt)).all()
    next_at = next_due.replace(tzinfo=since.tzinfo) if isinstance(next_due, datetime) else None
    return Overview(
        active=int(counts.get("active", 0)),
        paused=int(counts.get("paused", 0)),
        next_due=next_at,
        pending=int(pending or 0),
        delivery_failed=[(i, d, e or "") for i, d, e in failed],
    )


async def upcoming(s: AsyncSession, limit: int = 3) -> tuple[int, list[tuple[datetime, str]]]:
    """How many jobs are active, and the next few runs (time, text): `sidekick status`."""
    active = ScheduledJob.status == "active"
    count = await s.scalar(select(func.count()).select_from(ScheduledJob).where(active))
    stmt = (
        select(ScheduledJob.next_run_at, ScheduledJob.text)
        .where(active, ScheduledJob.next_run_at.is_not(None))
        .order_by(ScheduledJob.next_run_at)
        .limit(limit)
    )
    rows = (await s.execute(stmt)).all()
    return count or 0, [(at, text) for at, text in rows if at is not None]
