"""The APScheduler 3 AsyncIOScheduler that runs the features' jobs and the adapter's own.

The jobs derive what is due from the database, so they need no persistent job store and
nothing depends on APScheduler remembering a missed run (nor can a persisted job's reset
next_run_time drop one): each runs once at startup (the downtime catch-up), then on a grid
of whole minutes; `coalesce` folds runs missed while the loop stalled into one, the misfire
grace lets a late run still happen, and `max_instances=1` keeps runs from overlapping.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from datetime import UTC, datetime, timedelta
from typing import Any

from apscheduler.schedulers.asyncio import AsyncIOScheduler
from apscheduler.triggers.interval import IntervalTrigger

log = logging.getLogger(__name__)

Guard = Callable[[str], AbstractAsyncContextManager[bool]]

MISFIRE_GRACE_S = 15 * 60
STOP_GRACE_S = 5.0  # then cancel: every job's steps are idempotent, a restart redoes them


# (id, description, every, what to run): one periodic job.
JobSpec = tuple[str, str, timedelta, Callable[[], Awaitable[Any]]]


class AlignedInterval(IntervalTrigger):  # type: ignore[misc]  # APScheduler 3 is untyped
    """An interval whose runs stay on the grid of `start_date` (whole minutes): the next run
    is the first grid point after the previous one. IntervalTrigger adds the interval to the
    previous run, so the startup run would drag every later one off the minute (a reminder
    due at 09:00 fired up to a minute late)."""

    def get_next_fire_time(
        self, previous_fire_time: datetime | None, now: datetime
    ) -> datetime | None:
        if previous_fire_time is not None:
            # Strictly after the previous run, so a run on the grid point itself is not
            # scheduled again for the same instant; no more than that, or a startup run in
            # the last second before a minute would skip that minute's tick.
            now = max(now, previous_fire_time + timedelta(microseconds=1))
        fire: datetime | None = super().get_next_fire_time(None, now)
        return fire


class Scheduler:
    """Owns the AsyncIOScheduler; start() inside the running event loop, stop() at exit."""

    def __init__(self, specs: Sequence[JobSpec], guard: Guard | None = None) -> None:
        self._guard = guard
        self._specs = specs
        self._aps: AsyncIOScheduler | None = None
        self._running: set[asyncio.Task[Any]] = set()

    def _tracked(
        self, job_id: str, fn: Callable[[], Awaitable[Any]]
    ) -> Callable[[], Awaitable[Any]]:
        async def run() -> Any:
            task = asyncio.current_task()
            if task is not None:
                self._running.add(task)
            try:
                if self._guard is None:
                    return await fn()
                async with self._guard(job_id) as mine:
                    # Another worker runs this job now; it finds and does whatever is due
                    # (the jobs read what is due from the database), so skip this turn.
                    return await fn() if mine else None
            except asyncio.CancelledError:
                # Shutdown: the next start redoes what is due (APScheduler would log a traceback).
                log.info("scheduled job %s cancelled by shutdown", job_id)
                return None
            except Exception:
                # APScheduler would log it too, but without saying which of ours failed.
                log.exception("scheduled job %s failed", getattr(fn, "__name__", fn))
                return None
            finally:
                if task is not None:
                    self._running.discard(task)

        run.__name__ = getattr(fn, "__name__", "job")
        return run

    def start(self) -> None:
        # APScheduler logs two INFO lines per run ("Running job", "executed successfully"):
        # every minute, forever. Our jobs log what they did; keep its warnings and errors.
        logging.getLogger("apscheduler").setLevel(logging.WARNING)
        defaults = {"coalesce": True, "misfire_grace_time": MISFIRE_GRACE_S, "max_instances": 1}
        aps = AsyncIOScheduler(timezone=UTC, job_defaults=defaults)
        now = datetime.now(UTC)
        # Runs land on whole minutes (a reminder for 09:00 fires at 09:00:00, not 09:00:59).
        minute = now.replace(second=0, microsecond=0) + timedelta(minutes=1)
        for job_id, description, every, fn in self._specs:
            aps.add_job(
                self._tracked(job_id, fn),
                AlignedInterval(seconds=every.total_seconds(), start_date=minute, timezone=UTC),
                id=job_id,
                name=description,
                next_run_time=now,  # run at startup: catch up on whatever is due
            )
        aps.start()
        self._aps = aps
        log.info("scheduler started: %s", ", ".join(j for j, *_ in self._specs))

    async def stop(self) -> None:
        """Stop scheduling; give a running job a moment to finish."""
        aps, self._aps = self._aps, None
        if aps is None:
            return
        aps.pause()
        running = [t for t in self._running if not t.done()]
        if running:
            await asyncio.wait(running, timeout=STOP_GRACE_S)
        aps.shutdown(wait=False)
        await asyncio.sleep(0)  # let cancelled tasks unwind
        log.info("scheduler stopped")

    @property
    def running(self) -> bool:
        return self._aps is not None and self._aps.running

    def next_runs(self) -> dict[str, datetime | None]:
        """Each job's next run time; None while it is not scheduled (before start)."""
        jobs = (
            {j.id: j.next_run_time for j in self._aps.get_jobs()} if self._aps is not None else {}
        )
        return {job_id: jobs.get(job_id) for job_id, *_ in self._specs}


def start_scheduler(specs: Sequence[JobSpec], guard: Guard | None = None) -> Scheduler:
    """Build and start the scheduler (call from inside the running event loop). `guard(job
    id)` is entered around every run and yields whether this process may run it now (a lock
    shared by the workers: a due job runs once, not once per worker)."""
    scheduler = Scheduler(specs, guard)
    scheduler.start()
    return scheduler
