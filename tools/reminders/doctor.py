"""What `sidekick doctor` says about reminders: how many jobs, the next due run, and any
run that could not be delivered in the last week."""

from __future__ import annotations

from datetime import datetime, timedelta

from db.engine import SessionFactory
from tools.base import CheckResult
from tools.reminders import repo as repo

RECENT = timedelta(days=7)


async def reminder_checks(session_factory: SessionFactory, now: datetime) -> list[CheckResult]:
    async with session_factory() as s:
        o = await repo.overview(s, now - RECENT)
    nxt = f"{o.next_due:%Y-%m-%d %H:%M} UTC" if o.next_due else "none"
    jobs = (
        f"{o.active} active, {o.paused} paused job(s); next due run {nxt}; "
        f"{o.pending} run(s) waiting to be delivered"
    )
    out = [CheckResult("reminders", True, jobs)]
    if o.delivery_failed:
        run_id, due, error = o.delivery_failed[0]
        detail = (
            f"{len(o.delivery_failed)} run(s) not delivered in the last 7 days; newest: "
            f"run {run_id} due {due:%Y-%m-%d %H:%M} UTC: {error}"
        )
        fix = (
            "a 403 means the user blocked the bot (their jobs are paused until they "
            "resume them in /reminders); otherwise check TELEGRAM_API_URL and the network"
        )
        out.append(CheckResult("reminder delivery", False, detail, fix))
    return out
