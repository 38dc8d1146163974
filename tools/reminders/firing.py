"""Firing reminders and scheduled tasks, derived from the data like the session split.

`tick()` runs on the second a job comes due (the alarm, re-armed whenever the schedule
changes), every minute as a safety net, and once at startup (the catch-up). It claims due
jobs (one ledger row per job for its newest due run: a recurring job that missed N runs
fires once, a missed one-shot fires late with a note), runs claimed tasks in the background
(a slow task delays nobody) and delivers what is ready, chats in parallel, each chat in
order. A run is `sent` only with the message id that came back; failures retry with
backoff, a blocked bot (403) pauses the user's jobs.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from db.engine import SessionFactory
from db.locks import lock_key
from db.repos.core import Recipient
from tools.base import Clock
from tools.errors import public_text
from tools.feature import Deliver
from tools.reminders import changes
from tools.reminders import repo as repo
from tools.reminders.jobs import spec_of
from tools.reminders.repo import PendingRun
from tools.reminders.settings import ReminderSettings
from tools.reminders.times import catch_up, local_text, parse_hhmm, quiet_until
from tools.state import Key

log = logging.getLogger(__name__)

EVERY = timedelta(minutes=1)
JOB_ID = "reminders"  # the minute job's id (tools/reminders/feature.py)
# The scheduler's guard around the minute job holds this key on PostgreSQL (bot/telegram/
# main.py: namespace "job", the job's id); the alarm's tick takes the same one, so one
# worker fires at a time whichever way the tick began.
TICK_LOCK = lock_key("job", JOB_ID)
NAP_S = 60.0  # the alarm looks at the schedule again at least this often (other workers)
BUSY_S = 2.0  # another worker is firing: look again after this
LATE_AFTER = timedelta(minutes=5)  # a run delivered later than this says so
MAX_BACKOFF = timedelta(hours=1)


class RecipientBlocked(Exception):
    """The user blocked the bot (Telegram 403): nothing will reach them."""


class DeliveryRejected(Exception):
    """The message was refused for good (e.g. 400 chat not found): retrying cannot help."""


# (recipient, prompt) -> the assistant's answer; raises when the task fails.
RunTask = Callable[[Recipient, str], Awaitable[str]]
# Whether the bot still serves this Telegram id (tools/admission.py).
Admits = Callable[[int | None], Awaitable[bool]]
NOT_LET_IN = "not run: the owner removed this person"


@dataclass
class TickReport:
    claimed: int = 0
    skipped: int = 0
    sent: int = 0
    failed: int = 0  # delivery_failed
    retrying: int = 0
    tasks_started: int = 0

    def busy(self) -> bool:
        return any(vars(self).values())


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {text}"[:300] if text else type(exc).__name__


@dataclass
class ReminderJobs:
    session_factory: SessionFactory
    deliver: Deliver
    run_task: RunTask
    clock: Clock
    settings: ReminderSettings = field(default_factory=ReminderSettings)
    # The terminal serves the local user (no Telegram id); the bot every Telegram user.
    local: bool = False
    # Who is still served (tools/admission.py); None: everyone (no access feature).
    admits: Admits | None = None
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock, init=False)
    _started: bool = field(default=False, init=False)  # the first tick looks at everything
    _writer: asyncio.Task[None] | None = field(default=None, init=False)
    _unwritten: list[dict[str, Any]] = field(default_factory=list, init=False)
    _computing: dict[int, tuple[asyncio.Task[None], PendingRun]] = field(
        default_factory=dict, init=False
    )
    _ticking: asyncio.Lock = field(default_factory=asyncio.Lock, init=False)
    # Where the last tick started: what came due up to then was looked at by it (a run it
    # could not deliver waits for its retry time or the minute tick, not for the alarm).
    _floor: datetime | None = field(default=None, init=False)
    _alarm: asyncio.Task[None] | None = field(default=None, init=False)
    _poke: asyncio.Event = field(default_factory=asyncio.Event, init=False)
    _unlisten: Callable[[], None] | None = field(default=None, init=False)

    async def tick(self) -> TickReport:
        """Claim what is due, start tasks, deliver what is ready."""
        async with self._ticking:
            report = TickReport()
            now = self._floor = self.clock()
            if self._started and not await self._anything_due(now):
                return report  # the idle path: one indexed query, no write, no model call
            self._started = True
            await self.claim(now, report)
            await self.deliver_ready(report)
        if report.busy():
            log.info(
                "reminders: %d claimed, %d skipped, %d task(s) started, %d sent, "
                "%d delivery failed, %d to retry",
                report.claimed, report.skipped, report.tasks_started, report.sent,
                report.failed, report.retrying,
            )  # fmt: skip
        return report

    def arm(self) -> None:
        """Start the alarm (once; the minute job arms it at its first run): from then on a
        reminder fires within a moment of its due time instead of at the next minute tick,
        and a schedule change in this process re-arms it at once."""
        if self._alarm is not None and not self._alarm.done():
            return
        if self._unlisten is None:
            self._unlisten = changes.listen(self.session_factory, self._poke.set)
        self._alarm = asyncio.create_task(self._ring(), name="reminder-alarm")

    async def _ring(self) -> None:
        while True:
            try:
                await self._ring_once()
            except asyncio.CancelledError:
                raise
            except Exception:
                # The minute tick goes on regardless: reminders are late, not lost.
                log.exception("the reminder alarm failed; trying again in a minute")
                await asyncio.sleep(NAP_S)

    async def _ring_once(self) -> None:
        """Sleep until the next due moment (or a change, or a minute), then tick."""
        self._poke.clear()  # before reading: a change made meanwhile wakes the next sleep
        floor = self._floor or self.clock()
        async with self.session_factory() as s:
            at = await repo.first_due(s, floor)
        delay = NAP_S if at is None else (at - self.clock()).total_seconds()
        try:
            await asyncio.wait_for(self._poke.wait(), timeout=min(NAP_S, max(0.0, delay)))
            return  # the schedule changed: read it again
        except TimeoutError:
            pass
        if at is None or at > self.clock():
            return  # a nap, not a due moment: read the schedule again
        if not await self._exclusive_tick():
            await asyncio.sleep(BUSY_S)  # another worker fires now

    async def _exclusive_tick(self) -> bool:
        """One tick, unless another worker's tick holds the lock (False)."""
        async with self.session_factory() as s, s.begin():
            if not await repo.take_tick_lock(s, TICK_LOCK):
                return False
            await self.tick()
        return True

    async def _anything_due(self, now: datetime) -> bool:
        async with self.session_factory() as s:
            at = await repo.first_due(s)
        return at is not None and at <= now

    async def claim(self, now: datetime, report: TickReport | None = None) -> int:
        report = report or TickReport()
        window = timedelta(hours=self.settings.reminder_misfire_hours)
        runs: list[dict[str, Any]] = []
        moves: list[dict[str, Any]] = []
        async with self.session_factory() as s, s.begin():
            for job, quiet in await repo.due_jobs(s, now, local=self.local):
                assert job.next_run_at is not None
                spec = spec_of(job)
                c = catch_up(spec, job.next_run_at, now)
                run: dict[str, Any] = {
                    "job_id": job.id,
                    "user_id": job.user_id,
                    "due_at": c.due,
                    "started_at": now,
                    "deliver_after": now,
                    "text": job.text if job.kind == "reminder" else None,
                    "status": "pending",
                    "finished_at": None,
                    "error": None,
                }
                notes = []
                held = self._quiet_end(quiet, spec.tz, now)
                # The date shows when the message arrives on another day than it was due.
                when = local_text(c.due, spec.tz, held or now)
                if spec.kind != "at" and now - c.due > window:
                    run.update(status="skipped", finished_at=now, text=None)
                    run["error"] = (
                        f"missed (due {when}) by more than "
                        f"{self.settings.reminder_misfire_hours:g} hours"
                    )
                    report.skipped += 1
                else:
                    if now - c.due > LATE_AFTER:
                        notes.append(f"late: was due {when}")
                    if c.missed:
                        plural = "s" if c.missed > 1 else ""
                        notes.append(f"{c.missed} earlier run{plural} missed while I was down")
                    if held is not None:
                        run["deliver_after"] = held
                        if not notes:
                            notes.append(f"held for your quiet hours: was due {when}")
                    report.claimed += 1
                run["note"] = "; ".join(notes) or None
                runs.append(run)
                status = "active" if c.next is not None else "done"
                moves.append({"id": job.id, "next_run_at": c.next, "status": status})
            await repo.claim(s, runs, moves)
        return len(runs)

    @staticmethod
    def _quiet_end(quiet: repo.Quiet | None, tz: ZoneInfo, now: datetime) -> datetime | None:
        if quiet is None:
            return None
        try:
            return quiet_until(now, tz, parse_hhmm(quiet.start), parse_hhmm(quiet.end))
        except ValueError:
            return None

    async def deliver_ready(self, report: TickReport | None = None) -> None:
        """Deliver what is ready now (in a tick, or after a task finished)."""
        report = report or TickReport()
        async with self._lock:
            async with self.session_factory() as s:
                ready = await repo.pending_runs(s, self.clock(), local=self.local)
            by_user: dict[int, list[PendingRun]] = {}
            # Someone the owner removed: nothing is computed or delivered for them.
            admits = self.admits
            gone = [r for r in ready if admits and not await admits(r.recipient.telegram_id)]
            await self._skip_removed(gone)
            ready = [run for run in ready if run not in gone]
            for run in ready:
                if run.text is None:
                    if run.run_id not in self._computing:
                        self._start_task(run)
                        report.tasks_started += 1
                    continue
                by_user.setdefault(run.recipient.user_id, []).append(run)
            if not by_user:
                return
            gate = asyncio.Semaphore(self.settings.reminder_concurrency)

            async def one_chat(runs: list[PendingRun]) -> None:
                async with gate:
                    for run in runs:
                        if not await self._deliver_one(run, report):
                            return  # keep the chat's order: the rest waits for this one

            try:
                await asyncio.gather(*(one_chat(runs) for runs in by_user.values()))
            finally:
                await self._written()

    async def removed(self, telegram_id: int) -> None:
        """The owner removed this person (tools/admission.py): their tasks stop computing
        now; the runs are skipped by the next delivery."""
        gone = [c for c in self._computing.values() if c[1].recipient.telegram_id == telegram_id]
        for task, _ in gone:
            task.cancel()
        await asyncio.gather(*(task for task, _ in gone), return_exceptions=True)
        await self._skip_removed([run for _, run in gone])

    async def _skip_removed(self, runs: list[PendingRun]) -> None:
        """Their runs end skipped and their jobs pause (kept for the day they are let in
        again: /reminders resumes them)."""
        if not runs:
            return
        for run in runs:
            await self._finish(run, "skipped", error=NOT_LET_IN)
        await self._written()
        async with self.session_factory() as s, s.begin():
            for user_id in {run.recipient.user_id for run in runs}:
                await repo.pause_user(s, user_id, "removed")

    async def _deliver_one(self, run: PendingRun, report: TickReport) -> bool:
        """Deliver one run and record the outcome; False stops this chat for now."""
        bell = "⏰ " if run.kind == "reminder" and run.outcome == "sent" else ""
        text = f"{bell}{run.text}" + (f"\n({run.note})" if run.note else "")
        try:
            message_id = await self.deliver(run.recipient, text, run.kind == "task")
            if not isinstance(message_id, int) or message_id <= 0:
                raise RuntimeError(f"no message id came back ({message_id!r})")
        except RecipientBlocked:
            await self._blocked(run)
            report.failed += 1
            return False
        except DeliveryRejected as exc:
            await self._finish(run, "delivery_failed", error=_short(exc))
            report.failed += 1
            return True
        except Exception as exc:
            attempts = run.attempts + 1
            if attempts >= self.settings.reminder_delivery_attempts:
                log.warning("reminder run %d: delivery failed for good: %s", run.run_id, exc)
                await self._finish(run, "delivery_failed", error=_short(exc), attempts=attempts)
                report.failed += 1
                return True
            # From the whole minute: ticks run on whole minutes, and a retry time counted from
            # the end of the failed send (seconds past the tick) would wait one tick more.
            wait = min(timedelta(minutes=2 ** (attempts - 1)), MAX_BACKOFF)
            retry = self.clock().replace(second=0, microsecond=0) + wait
            await self._record({"id": run.run_id, "attempts": attempts, "error": _short(exc),
                                "deliver_after": retry})  # fmt: skip
            report.retrying += 1
            return False
        await self._finish(run, run.outcome, message_id=message_id, attempts=run.attempts + 1)
        if run.outcome == "sent":
            report.sent += 1
        return True

    @staticmethod
    def _row(run: PendingRun, status: str, now: datetime, error: str) -> dict[str, Any]:
        return {"id": run.run_id, "status": status, "finished_at": now, "error": error}

    async def _finish(self, run: PendingRun, status: str, **values: Any) -> None:
        await self._record({"id": run.run_id, "status": status, "finished_at": self.clock(),
                            **values})  # fmt: skip

    async def _record(self, row: dict[str, Any]) -> None:
        """Queue one ledger update; one writer commits what queued meanwhile together
        (SQLite has one writer), and the tick waits for it. Should the process die in
        between, the run is sent again at the next start: a duplicate, never a loss."""
        self._unwritten.append(row)
        if self._writer is None or self._writer.done():
            self._writer = asyncio.create_task(self._write())

    async def _write(self) -> None:
        while self._unwritten:
            rows, self._unwritten = self._unwritten, []
            try:
                async with self.session_factory() as s, s.begin():
                    await repo.finish_runs(s, rows)
            except Exception:
                # Those runs stay pending and go out again next time: logged, not lost.
                log.exception("recording %d reminder run(s) failed", len(rows))

    async def _written(self) -> None:
        while self._writer is not None and not self._writer.done():
            await asyncio.shield(self._writer)

    async def _blocked(self, run: PendingRun) -> None:
        now = self.clock()
        error = "the user blocked the bot (403)"
        async with self.session_factory() as s, s.begin():
            await repo.finish_runs(s, [self._row(run, "delivery_failed", now, error)])
            paused = await repo.pause_user(s, run.recipient.user_id, "blocked")
            await repo.end_pending(s, "delivery_failed", error, now, user_id=run.recipient.user_id)
        # Logged once: the jobs are paused, so nothing more is tried for this user.
        log.warning(
            "user %d blocked the bot: paused their %d active job(s); /reminders resumes them",
            run.recipient.user_id,
            paused,
        )

    def _start_task(self, run: PendingRun) -> None:
        task = asyncio.create_task(self._compute(run), name=f"scheduled-task-{run.run_id}")
        self._computing[run.run_id] = (task, run)
        task.add_done_callback(lambda _: self._computing.pop(run.run_id, None))

    async def _compute(self, run: PendingRun) -> None:
        try:
            answer = (await self.run_task(run.recipient, run.job_text)).strip() or "(no answer)"
        except asyncio.CancelledError:
            raise  # shutdown: the run stays pending and is computed again at the next start
        except Exception as exc:
            await self._task_failed(run, exc)
        else:
            async with self.session_factory() as s, s.begin():
                await repo.set_run_text(s, run.run_id, answer)
        try:
            await self.deliver_ready()
        except Exception:
            log.exception("delivering after scheduled task run %d failed", run.run_id)

    async def _task_failed(self, run: PendingRun, exc: Exception) -> None:
        # The notice, the ledger and /reminders history get the chat's masked text: a
        # provider's own error text may echo the request's headers.
        reason = public_text(exc)
        log.warning("scheduled task #%d (run %d) failed: %s", run.job_id, run.run_id, _short(exc))
        now = self.clock()
        async with self.session_factory() as s, s.begin():
            if await repo.previous_run_failed(s, run.job_id, run.run_id):
                # Already told about this failure streak: record it, say nothing.
                await repo.finish_runs(s, [self._row(run, "failed", now, reason)])
                return
            notice = (
                f"⚠️ Your scheduled task #{run.job_id} failed: {reason.rstrip('.')}. It stays "
                "scheduled; I'll only tell you again after it has worked once."
            )
            await repo.set_run_text(s, run.run_id, notice, outcome="failed")
            await repo.finish_runs(s, [{"id": run.run_id, "error": reason}])

    async def idle(self) -> None:
        """Wait until no task is computing (and what they produced was delivered)."""
        while self._computing:
            await asyncio.gather(*[t for t, _ in self._computing.values()], return_exceptions=True)

    async def stop(self) -> None:
        """Stop the alarm; cancel tasks still computing (their runs stay pending: redone at
        next start)."""
        if self._unlisten is not None:
            self._unlisten()
            self._unlisten = None
        tasks = [task for task, _ in self._computing.values()]
        if self._alarm is not None:
            tasks.append(self._alarm)
            self._alarm = None
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        await self._written()


REMINDERS: Key[ReminderJobs] = Key("reminders.jobs")
