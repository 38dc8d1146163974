"""/checkins: turn check-ins on or off and shape them; the buttons under each check-in. In a
group, /checkins is the group's: a member's `on` gives the group a morning brief (theirs:
their quiet hours, cap and budget), anyone there may turn it off."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from bot.checkins import repo
from bot.checkins.models import CheckinPrefs
from bot.checkins.runs import FOLLOWUP_AFTER
from tools.base import user_tz
from tools.feature import Answer, Button, CommandCall, Pressed, Who, bounded, row_id
from tools.reminders.times import in_quiet, parse_hhmm

USAGE = (
    "/checkins on · off · at HH:MM (the morning brief) · quiet HH:MM-HH:MM · "
    "max N (messages a day) · topic <what the brief looks at> · topic off"
)
GROUP_USAGE = (
    "In a group: /checkins on (a morning brief for this group, from your check-ins' "
    "quiet hours, cap and budget) · off · at HH:MM; the rest of yours is set in our "
    "private chat."
)
MOST_PER_DAY = 5


def _group(who: Who) -> int | None:
    """The group the command was sent in; None in the person's private chat."""
    return who.chat_id if who.chat_id is not None and who.chat_id != who.telegram_id else None


def _inside(at: str, p: CheckinPrefs) -> bool:
    return in_quiet(parse_hhmm(at), parse_hhmm(p.quiet_start), parse_hhmm(p.quiet_end))


def _status(p: CheckinPrefs, month: dict[str, Any], tz: str) -> str:
    follow = datetime.combine(date.min, parse_hhmm(p.brief_at)) + FOLLOWUP_AFTER
    counts = month["counts"]
    stopped = [
        f"{counts[k]} {what}"
        for k, what in (("capped", "by the daily cap"), ("budget", "by the budget"))
        if counts.get(k)
    ]
    lines = [
        f"Check-ins: {'on' if p.enabled else 'off'}",
        f"Morning brief at {p.brief_at}, a follow-up at {follow:%H:%M} "
        f"({tz}); only when there is something worth saying",
        f"Quiet hours: {p.quiet_start}-{p.quiet_end}",
        f"At most {p.max_per_day} a day",
        f"Brief looks at: {p.topic or '(nothing chosen)'}",
        f"Your answers: {p.useful} useful, {p.less} less of this",
        f"cost: ${month['cost']:.4f} this month over {counts.get('sent', 0)} sent, "
        f"{counts.get('nothing', 0)} with nothing to say"
        + (f"; stopped before the model call: {', '.join(stopped)}" if stopped else ""),
    ]
    return "\n".join(lines) + "\n\n" + USAGE


async def checkins(call: CommandCall) -> Answer:
    words = call.args.split(maxsplit=1)
    verb = words[0].lower() if words else ""
    rest = words[1].strip() if len(words) > 1 else ""
    if (group := _group(call.who)) is not None:
        return await _in_group(call, group, verb, rest)
    error = ""
    async with call.host.deps.session_factory() as s, s.begin():
        p = await repo.prefs(s, call.who.user_id)
        if verb == "on":
            p.enabled = True
        elif verb == "off":
            p.enabled = False
        elif verb == "at":
            at, error = _checked_time(p, rest)
            p.brief_at = at or p.brief_at  # unchanged when the time is refused
        elif verb == "quiet":
            error = _set_quiet(p, rest)
        elif verb == "max":
            most = bounded(rest, 0, MOST_PER_DAY)
            if most:
                p.max_per_day = most
            else:
                error = f"max takes a number from 1 to {MOST_PER_DAY}."
        elif verb == "topic":
            p.topic = "" if rest.lower() in ("", "off") else rest[:200]
        elif verb:
            error = f"I don't know /checkins {verb}."
        month = call.host.deps.clock().astimezone(call.who.tz).strftime("%Y-%m")
        summary = await repo.month_summary(s, call.who.user_id, month)
        text = _status(p, summary, call.who.tz.key)
        on = p.enabled
    if error:
        return Answer(error + "\n" + USAGE)
    toggle = Button("Turn off", "off") if on else Button("Turn on", "on")
    return Answer(text, ((toggle,),))


def _checked_time(p: CheckinPrefs, value: str, where: str = "") -> tuple[str, str]:
    """(HH:MM, "") or ("", why not): a time outside `p`'s quiet hours."""
    try:
        at = parse_hhmm(value).strftime("%H:%M")
    except ValueError:
        return "", f"at takes a time like 07:30, not {value!r}."
    if _inside(at, p):
        return "", (
            f"{at} is inside your quiet hours ({p.quiet_start}-{p.quiet_end}); pick a time "
            f"outside them, or change them with /checkins quiet{where}."
        )
    return at, ""


async def _in_group(call: CommandCall, chat_id: int, verb: str, rest: str) -> Answer:
    """The group's brief: asked for by a member here (on, at), turned off by anyone here;
    its status names whose it is and nothing of their private check-ins."""
    error = ""
    async with call.host.deps.session_factory() as s, s.begin():
        if verb in ("on", "at"):
            # Asking for it makes it the asker's: their quiet hours, cap and budget.
            mine = await repo.prefs(s, call.who.user_id)
            now = call.host.deps.clock()
            if verb == "at":
                at, error = _checked_time(mine, rest, " in our private chat")
            else:
                at = mine.brief_at
            if not error:
                row = await repo.ask_in_group(s, chat_id, call.who.user_id, at, now)
                if verb == "at":
                    row.brief_at = at
                elif _inside(row.brief_at, mine):
                    row.brief_at = mine.brief_at
        elif verb == "off":
            await repo.group_off(s, chat_id)
        elif verb:
            error = f"I don't know /checkins {verb} in a group."
        found = await repo.group(s, chat_id)
        prefs = None if found is None else await repo.prefs(s, found[0].user_id)
    if error:
        return Answer(error + "\n" + GROUP_USAGE)
    if found is None or prefs is None or not found[0].enabled:
        text = "Check-ins in this group: off (a member turns them on with /checkins on)."
        return Answer(text + "\n\n" + GROUP_USAGE, ((Button("Turn on", "on"),),))
    group, member = found
    tz = user_tz(member.timezone, call.host.deps.tz).key
    name = member.name or "a member"
    text = (
        f"Check-ins in this group: on, asked for by {name}\n"
        f"Morning brief at {group.brief_at} ({tz}); only when there is something worth "
        f"saying, never in the quiet hours of {name} ({prefs.quiet_start}-{prefs.quiet_end}), "
        f"at most {prefs.max_per_day} a day here"
    )
    return Answer(text + "\n\n" + GROUP_USAGE, ((Button("Turn off", "off"),),))


def _set_quiet(p: CheckinPrefs, value: str) -> str:
    start, _, end = value.partition("-")
    try:
        p.quiet_start = parse_hhmm(start).strftime("%H:%M")
        p.quiet_end = parse_hhmm(end).strftime("%H:%M")
    except ValueError:
        return f"quiet takes hours like 22:00-08:00, not {value!r}."
    return ""


async def press(call: CommandCall) -> Pressed:
    verb, _, rest = call.args.partition(":")
    group = _group(call.who)
    if group is not None and verb in ("stop", "off", "on"):
        async with call.host.deps.session_factory() as s, s.begin():
            if verb == "on":
                mine = await repo.prefs(s, call.who.user_id)
                now = call.host.deps.clock()
                await repo.ask_in_group(s, group, call.who.user_id, mine.brief_at, now)
                return Pressed("This group's check-ins are on.")
            await repo.group_off(s, group)
        return Pressed("This group's check-ins are off. /checkins on here brings them back.")
    async with call.host.deps.session_factory() as s, s.begin():
        p = await repo.prefs(s, call.who.user_id)
        if verb in ("stop", "off"):
            p.enabled = False
            return Pressed("Check-ins are off. /checkins on brings them back.")
        if verb == "on":
            p.enabled = True
            return Pressed("Check-ins are on.")
        run = row_id(rest)
        if verb in ("useful", "less") and run is not None:
            if await repo.run_of(s, run, call.who.user_id) is None:
                return Pressed("That check-in is not yours.", alert=True)
            if verb == "useful":
                p.useful += 1
                return Pressed("Thanks, noted: more like this.")
            p.less += 1
            if p.less > p.useful and p.max_per_day > 1:
                p.max_per_day -= 1
            return Pressed(f"Noted: fewer and shorter ({p.max_per_day} a day at most).")
    return Pressed("That button is no longer valid.", alert=True)
