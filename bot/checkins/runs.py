"""Running check-ins: each minute, every person whose slot is due (the morning brief, a
follow-up six hours later) gets one scheduled request of their own (`host.ask`). The slot is
claimed first, so a restart or a second worker never sends one morning two briefs, and a
failed run is not retried that day; quiet hours, the daily cap and the model budget (never
overrun) are checked before the model is asked; an empty or sentinel answer sends nothing.
A group's brief is the requesting member's request held in the group, within their limits."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from bot.checkins import repo
from bot.checkins.models import CheckinPrefs
from bot.usage.meter import METER
from db.models.core import User
from db.repos.core import Recipient
from tools.admission import ADMISSION, Admission
from tools.base import user_tz
from tools.errors import public_text
from tools.feature import Host
from tools.reminders.times import local_instant, parse_hhmm, quiet_until

log = logging.getLogger(__name__)

NOTHING = "NOTHING"
# How late a slot may still run (the bot was down at brief time): later, the day's slot is
# let go rather than sending a morning brief in the afternoon.
WINDOW = timedelta(hours=2)
FOLLOWUP_AFTER = timedelta(hours=6)
SLOTS = ("brief", "followup")


def quiet(prefs: CheckinPrefs, when: datetime, tz: ZoneInfo) -> bool:
    start, end = parse_hhmm(prefs.quiet_start), parse_hhmm(prefs.quiet_end)
    return quiet_until(when, tz, start, end) is not None


def due_slots(
    prefs: CheckinPrefs,
    now: datetime,
    tz: ZoneInfo,
    brief_at: str | None = None,
    slots: tuple[str, ...] = SLOTS,
) -> list[tuple[str, str]]:
    """The (slot, local day) pairs past their time by less than WINDOW, neither the slot nor
    now in quiet hours. `brief_at`: a group's time (default: the person's own)."""
    local = now.astimezone(tz)
    out = []
    for slot in slots:
        at = local_instant(local.date(), parse_hhmm(brief_at or prefs.brief_at), tz)
        at += FOLLOWUP_AFTER if slot == "followup" else timedelta()
        if at <= now < at + WINDOW and not quiet(prefs, at, tz) and not quiet(prefs, now, tz):
            out.append((slot, local.date().isoformat()))
    return out


def prompt(prefs: CheckinPrefs, slot: str, group: bool = False) -> str:
    if group:
        ask = (
            "Write this group's short morning brief: what was planned or left open in this "
            "group that matters today (search the memory: only what was said in this group "
            "is found here). Every member reads it: nothing from my private chat."
        )
    elif slot == "brief":
        ask = (
            "Write my short morning brief: today's reminders and tasks (list them with the "
            "schedule tool), what is waiting on me, and anything I said in passing I would "
            "do today or tomorrow (search my memory)"
        )
        ask += f", and a short look at {prefs.topic}." if prefs.topic else "."
    else:
        ask = (
            "Look in my memory and our recent conversation for an open thread I may want a "
            "nudge on today (something I meant to do, a question left open) and write one "
            "short follow-up about it."
        )
    if prefs.less > prefs.useful:
        ask += " I asked for less of these: only what clearly matters, in two lines at most."
    return (
        f"{ask} This is a check-in I turned on, not a question I asked: if nothing is worth "
        f"my attention, answer exactly {NOTHING} and nothing else."
    )


def buttons(run_id: int) -> tuple[tuple[str, str], ...]:
    return (
        ("👍 useful", f"checkins:useful:{run_id}"),
        ("less of this", f"checkins:less:{run_id}"),
        ("stop", "checkins:stop"),
    )


@dataclass
class Outcome:
    user_id: int
    slot: str
    status: str  # sent | nothing | capped | budget | failed | taken
    chat_id: int = 0  # the group's, for a group's brief


async def tick(host: Host, now: datetime) -> list[Outcome]:
    deps = host.deps
    # Each person's own slots; and a group's brief, held for the member who asked there.
    async with deps.session_factory() as s:
        wanted: list[tuple[CheckinPrefs, User, int, str | None, tuple[str, ...]]]
        wanted = [(p, u, 0, None, SLOTS) for p, u in await repo.enabled(s)]
        if not host.local:  # the terminal serves its local user only: no groups there
            groups = await repo.enabled_groups(s)
            wanted += [(p, u, g.chat_id, g.brief_at, ("brief",)) for g, p, u in groups]
    # Someone the owner removed hears nothing more (tools/admission.py).
    admission: Admission | None = None
    if host.has(ADMISSION):
        admission = await host.need(ADMISSION)
    outcomes = []
    for prefs, user, chat_id, brief_at, slots in wanted:
        # Served as their message there would be: a person let in, or anyone in a group
        # the owner admitted (bot/telegram/middlewares.py).
        ids = (user.telegram_id, chat_id) if chat_id else (user.telegram_id,)
        if admission is not None and not any([await admission.admits(i) for i in ids]):
            continue
        tz = user_tz(user.timezone, deps.tz)
        for slot, day in due_slots(prefs, now, tz, brief_at, slots):
            outcomes.append(await run_one(host, prefs, user, slot, day, now, chat_id))
    return outcomes


def said_nothing(answer: str) -> bool:
    return re.sub(r"[^A-Za-z]", "", answer).upper() in ("", NOTHING)


async def run_one(
    host: Host,
    prefs: CheckinPrefs,
    user: User,
    slot: str,
    day: str,
    now: datetime,
    chat_id: int = 0,
) -> Outcome:
    sf = host.deps.session_factory
    async with sf() as s, s.begin():
        run_id = await repo.claim(s, user.id, day, slot, now, chat_id)
        if run_id is None:
            return Outcome(user.id, slot, "taken", chat_id)
        if await repo.sent_today(s, user.id, day, chat_id) >= prefs.max_per_day:
            note = f"stopped before the model call: {prefs.max_per_day} check-ins today already"
            await repo.finish(s, run_id, status="capped", finished_at=now, note=note)
            return Outcome(user.id, slot, "capped", chat_id)
    if (over := await _over_budget(host, user.id)) is not None:
        async with sf() as s, s.begin():
            await repo.finish(s, run_id, status="budget", finished_at=now, note=over)
        return Outcome(user.id, slot, "budget", chat_id)
    recipient = Recipient(user.id, user.telegram_id, user.name, chat_id or None)
    started = host.deps.clock()
    try:
        answer = (await host.ask(recipient, prompt(prefs, slot, bool(chat_id)))).strip()
        status = "nothing" if said_nothing(answer) else "sent"
        if status == "sent":
            await host.deliver(recipient, answer, True, buttons=buttons(run_id))
    except Exception as exc:  # reported once below; the slot is never tried again today
        return await _failed(host, recipient, run_id, slot, exc)
    finally_at = host.deps.clock()
    async with sf() as s, s.begin():
        cost = await repo.scheduled_cost(s, user.id, started, finally_at)
        await repo.finish(s, run_id, status=status, finished_at=finally_at, cost_usd=cost)
    return Outcome(user.id, slot, status, chat_id)


async def _over_budget(host: Host, user_id: int) -> str | None:
    """Why the run would pass a budget, or None. Optional, a check-in never spends what the
    person's own questions may need: it needs the room its last run cost."""
    if not host.has(METER):
        return None
    meter = await host.need(METER)
    if (refusal := await meter.refusal(user_id)) is not None:
        return refusal
    async with host.deps.session_factory() as s:
        estimate = await repo.last_cost(s, user_id)
    for limit in meter.limits(await meter.spent(), user_id):
        if limit.key in ("day", "month") and estimate and limit.used + estimate > limit.cap:
            return (
                f"the {limit.key}'s budget has ${limit.cap - limit.used:.4f} left, less than "
                f"a check-in costs (${estimate:.4f} last time)"
            )
    return None


async def _failed(
    host: Host, recipient: Recipient, run_id: int, slot: str, exc: Exception
) -> Outcome:
    reason = public_text(exc)
    log.warning("check-in %d (%s) of user %d failed: %s", run_id, slot, recipient.user_id, reason)
    chat_id = recipient.chat_id or 0
    async with host.deps.session_factory() as s, s.begin():
        told = await repo.previous_failed(s, recipient.user_id, run_id, chat_id)
        await repo.finish(
            s, run_id, status="failed", finished_at=host.deps.clock(), note=reason[:500]
        )
    if not told:
        whose = "This group's" if recipient.chat_id else "Your"
        text = (
            f"⚠️ {whose} check-in could not run: {reason.rstrip('.')}. I won't try it again "
            "today, and I'll only tell you again after one has worked."
        )
        try:
            await host.deliver(recipient, text, False)
        except Exception:
            log.exception("telling user %d about a failed check-in failed", recipient.user_id)
    return Outcome(recipient.user_id, slot, "failed", chat_id)
