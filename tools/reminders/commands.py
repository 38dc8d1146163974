"""/reminders (upcoming jobs, with pause/resume/cancel buttons where the adapter shows
them), /reminders history (the run ledger) and /quiet HH:MM-HH:MM (quiet hours that hold
reminders back). Both adapters render these answers."""

from __future__ import annotations

import re

from tools.base import ToolError
from tools.feature import Answer, Button, CommandCall, Pressed, row_id
from tools.reminders import jobs
from tools.reminders import repo as schedule_repo
from tools.reminders.jobs import DONE as DONE
from tools.reminders.jobs import Change
from tools.reminders.models import ScheduledJob
from tools.reminders.times import local_text, parse_hhmm
from tools.reminders.undo import UNDO, undo

HISTORY = 15
SHOWN = 30
STATUS_MARK = {
    "sent": "✅",
    "failed": "❌",
    "delivery_failed": "📭",
    "skipped": "⏭",
    "pending": "⏳",
}
QUIET_USAGE = "Usage: /quiet 22:00-07:00 (reminders wait until it ends) · /quiet off · /quiet"
ACTIONS: dict[str, Change] = {"cancel": "cancel", "pause": "pause", "resume": "resume"}


def _buttons(found: list[ScheduledJob]) -> tuple[tuple[Button, ...], ...]:
    rows: list[tuple[Button, ...]] = []
    for job in found:
        cancel = Button(f"✖ Cancel #{job.id}", f"cancel:{job.id}")
        if job.status == "done":  # came due, waits for delivery: only cancelling is left
            rows.append((cancel,))
            continue
        toggle = "resume" if job.status == "paused" else "pause"
        label = f"▶ Resume #{job.id}" if toggle == "resume" else f"⏸ Pause #{job.id}"
        rows.append((Button(label, f"{toggle}:{job.id}"), cancel))
    return tuple(rows)


async def upcoming(call: CommandCall) -> Answer:
    deps, tz = call.host.deps, call.who.tz
    found = await jobs.listing(deps.session_factory, call.who.user_id)
    if not found:
        return Answer(
            "No reminders or tasks. Ask me, e.g. “remind me tomorrow at 9 to call Anna” or "
            "“every weekday at 8 send me the weather”."
        )
    now = deps.clock()
    lines = [f"Your reminders and tasks (times in {tz.key}):"]
    lines += [jobs.job_line(j, now) for j in found[:SHOWN]]
    if len(found) > SHOWN:
        lines.append(f"… and {len(found) - SHOWN} more")
    return Answer("\n".join(lines), _buttons(found[:SHOWN]))


async def history(call: CommandCall) -> str:
    deps, tz = call.host.deps, call.who.tz
    async with deps.session_factory() as s:
        runs = await schedule_repo.history(s, call.who.user_id, HISTORY)
    if not runs:
        return "No reminder has run yet."
    now = deps.clock()
    out = [f"Last {len(runs)} runs (times in {tz.key}):"]
    for r in runs:
        text = r.text if len(r.text) <= 60 else r.text[:59] + "…"
        line = f"{STATUS_MARK.get(r.status, '?')} #{r.job_id} {local_text(r.due_at, tz, now)} "
        line += f"{r.status} · {text}"
        if r.error and r.status != "sent":
            line += f" — {r.error[:120]}"
        out.append(line)
    return "\n".join(out)


async def reminders(call: CommandCall) -> Answer | str:
    if call.args.strip().lower() == "history":
        return await history(call)
    return await upcoming(call)


def _quiet_text(quiet: schedule_repo.Quiet | None) -> str:
    if quiet is None:
        return "No quiet hours. " + QUIET_USAGE
    return (
        f"Quiet hours: {quiet.start}-{quiet.end} in your time zone. Reminders due then "
        "arrive when they end; scheduled tasks still run on time. /quiet off removes them."
    )


async def quiet(call: CommandCall) -> str:
    arg, user_id = call.args.strip().lower(), call.who.user_id
    async with call.host.deps.session_factory() as s, s.begin():
        if not arg:
            return _quiet_text(await schedule_repo.get_quiet(s, user_id))
        if arg in ("off", "none", "no"):
            await schedule_repo.set_quiet(s, user_id, None)
            return "Quiet hours off: reminders arrive on time, day and night."
        m = re.fullmatch(r"(\d{1,2}:\d{2})\s*[-–]\s*(\d{1,2}:\d{2})", arg)
        try:
            start, end = (parse_hhmm(m.group(1)), parse_hhmm(m.group(2))) if m else (None, None)
        except ValueError:
            start = end = None
        if start is None or end is None or start == end:
            return QUIET_USAGE
        hours = schedule_repo.Quiet(f"{start:%H:%M}", f"{end:%H:%M}")
        await schedule_repo.set_quiet(s, user_id, hours)
        return _quiet_text(hours)


async def press(call: CommandCall) -> Pressed:
    """A pause/resume/cancel button under /reminders: do it, then show the list anew. An
    Undo under an answer cancels what that request created (tools/reminders/undo.py)."""
    action, _, number = call.args.partition(":")
    if action == UNDO:
        return await undo(call, number)
    change, job_id = ACTIONS.get(action), row_id(number)
    if change is None or job_id is None:
        return Pressed("That button is out of date.", alert=True)
    try:
        job = await jobs.change(
            call.host.deps.session_factory,
            user_id=call.who.user_id,
            job_id=job_id,
            action=change,
            now=call.host.deps.clock(),
        )
    except ToolError:
        return Pressed(f"There is no reminder #{number}.", alert=True)
    return Pressed(f"{DONE[action]} #{job.id}.", await upcoming(call))
