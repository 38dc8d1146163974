"""From what the model passes (the user's words and structured fields) to a `Spec`. Every
time is wall-clock time in the user's zone (an offset or a `Z` is refused); a time that has
passed, or words that say nothing readable, come back as a ToolError the model can act on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import date, datetime, time, timedelta
from zoneinfo import ZoneInfo

from tools.base import ToolError
from tools.reminders.times import (
    ALL_DAYS,
    WEEKDAYS,
    WEEKEND,
    WORKDAYS,
    Spec,
    describe,
    local_instant,
)

MIN_EVERY_S = 60
MAX_AHEAD = timedelta(days=5 * 366)
CLOCK = r"\d{1,2}(?::\d{2})?\s*(?:am|pm|a\.m\.|p\.m\.)?"
UNITS = {"m": 60, "min": 60, "minute": 60, "h": 3600, "hr": 3600, "hour": 3600}
DAY_NAMES = {
    **{d: i for i, d in enumerate(WEEKDAYS)},
    **{n: i for i, n in enumerate(
        ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"))},
    "tues": 1, "wednes": 2, "thur": 3, "thurs": 3,
}  # fmt: skip


@dataclass(frozen=True)
class Fields:
    """The structured time fields of the tool (all wall-clock, in the user's zone)."""

    at: str | None = None
    in_minutes: int | None = None
    every: str | None = None
    daily_at: str | None = None
    days: str | None = None

    def timing(self) -> list[str]:
        """The fields given that set the time (`days` only qualifies `daily_at`)."""
        return [k for k, v in vars(self).items() if v is not None and k != "days"]

    def given(self) -> bool:
        return bool(self.timing())


def parse_clock(value: str) -> time:
    """'9', '09:30', '9am', '9:30 pm', '21:00' → time; ToolError otherwise."""
    m = re.fullmatch(r"\s*(\d{1,2})(?::(\d{2}))?\s*(am|pm|a\.m\.|p\.m\.)?\s*", value.lower())
    if not m:
        raise ToolError(f"{value!r} is not a time of day: use HH:MM (24 h), e.g. 09:00")
    hour, minute, half = int(m.group(1)), int(m.group(2) or 0), m.group(3)
    if half:
        if not 1 <= hour <= 12:
            raise ToolError(f"{value!r}: with am/pm the hour is 1-12")
        hour = hour % 12 + (12 if half.startswith("p") else 0)
    if hour > 23 or minute > 59:
        raise ToolError(f"{value!r} is not a time of day: use HH:MM (24 h), e.g. 09:00")
    return time(hour, minute)


def parse_days(value: str) -> int:
    """'weekdays', 'weekends', 'daily', 'mon,wed,fri', 'mon-fri' → weekday bits (Monday = 1)."""
    v = value.lower().strip()
    if v in ("", "daily", "every day", "day", "days", "all", "everyday"):
        return ALL_DAYS
    if v in ("weekdays", "weekday", "workdays", "workday", "business days"):
        return WORKDAYS
    if v in ("weekends", "weekend"):
        return WEEKEND
    m = re.fullmatch(r"([a-z]+)\s*-\s*([a-z]+)", v)
    a, b = (_day(m.group(1)), _day(m.group(2))) if m else (None, None)
    if a is not None and b is not None:
        span = range(a, b + 1) if a <= b else [*range(a, 7), *range(0, b + 1)]
        return sum(1 << d for d in span)
    bits = 0
    for part in re.split(r"[,\s/]+|\band\b", v):
        if not part:
            continue
        d = _day(part)
        if d is None:
            raise ToolError(
                f"{value!r}: days are weekdays, weekends, daily, or names like mon,wed,fri"
            )
        bits |= 1 << d
    return bits


def _day(word: str) -> int | None:
    w = word.strip().rstrip(".")
    w = w[:-1] if w.endswith("s") and w[:-1] in DAY_NAMES else w
    return DAY_NAMES.get(w)


def parse_every(value: str) -> int:
    """'30m', '2h', '90 minutes', 'every 2 hours' → seconds (at least one minute)."""
    v = value.lower().strip().removeprefix("every").strip()
    m = re.fullmatch(r"(\d+)?\s*([a-z]+?)s?", v.replace(" ", "")) if v else None
    unit = m.group(2) if m else ""
    if unit.startswith("minute"):
        unit = "minute"
    if m is None or unit not in UNITS:
        if m is not None and unit in ("d", "day", "week", "w"):
            raise ToolError(
                "for whole days use daily_at (and days): a wall-clock time keeps 08:00 "
                "across daylight-saving changes; `every` is for minutes and hours"
            )
        raise ToolError(f"{value!r}: `every` takes minutes or hours, e.g. 30m, 2h, 90 minutes")
    seconds = int(m.group(1) or 1) * UNITS[unit]
    if seconds < MIN_EVERY_S:
        raise ToolError("`every` must be at least one minute")
    return seconds


def _date_part(words: str, today: date) -> tuple[date | None, bool]:
    """A date from words ('', 'today', 'tomorrow', 'friday', '2026-11-24'); (date, explicit)."""
    w = re.sub(r"\b(on|this|at)\b", " ", words).strip()
    if w in ("", "today", "tonight", "this evening", "this morning"):
        return today, False
    if w == "tomorrow":
        return today + timedelta(days=1), True
    if w == "day after tomorrow":
        return today + timedelta(days=2), True
    m = re.fullmatch(r"(\d{4})-(\d{2})-(\d{2})", w)
    if m:
        try:
            return date(int(m.group(1)), int(m.group(2)), int(m.group(3))), True
        except ValueError:
            raise ToolError(f"{w!r} is not a real date") from None
    nxt = w.removeprefix("next ").strip()
    d = _day(nxt)
    if d is not None:
        ahead = (d - today.weekday()) % 7 or 7
        return today + timedelta(days=ahead), True
    return None, False


def parse_at(value: str, now: datetime, tz: ZoneInfo) -> datetime:
    """A one-shot time in the user's zone → UTC. Refuses offsets and times that passed."""
    v = value.strip().lower()
    if re.match(r"\d{4}-\d{2}-\d{2}t", v):  # ISO 8601's "T" between date and time
        v = v.replace("t", " ", 1)
    if re.search(r"(z|[+-]\d{2}:?\d{2})$", v) and re.match(r"\d{4}-", v):
        raise ToolError(
            "give `at` as the user's local wall-clock time without an offset "
            "(e.g. 2026-11-24 09:00); the server converts it in the user's time zone"
        )
    v = re.sub(r":\d{2}(\.\d+)?$", "", v) if re.search(r"\d:\d{2}:\d{2}", v) else v
    m = re.fullmatch(rf"(.*?)\s*(?:\bat\s+)?({CLOCK})", v)
    if not m:
        raise ToolError(f"could not read {value!r} as a time: use HH:MM or YYYY-MM-DD HH:MM")
    local_now = now.astimezone(tz)
    day, explicit = _date_part(m.group(1), local_now.date())
    if day is None:
        raise ToolError(
            f"could not read the date in {value!r}: use YYYY-MM-DD, today, tomorrow or a weekday"
        )
    clock = parse_clock(m.group(2))
    run = local_instant(day, clock, tz)
    if run < now.replace(second=0, microsecond=0):
        if not explicit and day == local_now.date():
            raise ToolError(
                f"that time has passed today (it is {local_now:%H:%M} in {tz.key} now): "
                f"did you mean tomorrow {clock:%H:%M}? If so, call again with "
                f'at="tomorrow {clock:%H:%M}".'
            )
        raise ToolError(
            f"{day:%Y-%m-%d} {clock:%H:%M} is in the past (it is "
            f"{local_now:%Y-%m-%d %H:%M} in {tz.key} now)"
        )
    if run - now > MAX_AHEAD:
        raise ToolError("that is more than five years ahead: pick a nearer date")
    return max(run, now)


def from_words(when: str) -> Fields:
    """Structured fields from common phrasings: 'in 20 minutes', 'tomorrow at 9',
    'every 2 hours', 'every weekday at 8', 'daily at 08:00 on weekdays', 'mondays 9am'."""
    w = re.sub(r"\s+", " ", when.lower().replace("o'clock", "")).strip(" .!")
    w = re.sub(r"^(remind me|please)\s+", "", w)
    m = re.fullmatch(r"in (an?|half an|\d+) (minutes?|mins?|hours?|hrs?|h|m)", w)
    if m:
        n = {"a": 1, "an": 1, "half an": 0.5}.get(m.group(1)) or int(m.group(1))
        minutes = n * (60 if m.group(2).startswith("h") else 1)
        return Fields(in_minutes=int(minutes))
    m = re.fullmatch(
        rf"(?:every|each) (\d+ )?(minutes?|mins?|hours?|hrs?)"
        rf"(?: (?:starting |from )?at ({CLOCK}))?",
        w,
    )
    if m:
        return Fields(every=f"{m.group(1) or 1} {m.group(2)}", at=m.group(3))
    m = re.fullmatch(rf"(.*?)\s*(?:\bat\s+)?({CLOCK})(?: (on .+|every .+|daily))?", w)
    if m:
        rest = f"{m.group(1)} {m.group(3) or ''}".strip()
        if re.search(r"\b(every|each|daily|weekdays|weekends|mondays|tuesdays|wednesdays|"
                     r"thursdays|fridays|saturdays|sundays)\b", rest):  # fmt: skip
            days = re.sub(r"\b(every|each|on|daily)\b", " ", rest).strip() or "daily"
            return Fields(daily_at=m.group(2), days=days)
        return Fields(at=f"{rest} {m.group(2)}".strip())
    raise ToolError(
        f"could not read a time in {when!r}: pass the structured fields: at (YYYY-MM-DD HH:MM "
        "or HH:MM), in_minutes, every (30m, 2h) or daily_at (HH:MM) with days"
    )


def build_spec(fields: Fields, when: str, now: datetime, tz: ZoneInfo) -> Spec:
    """The schedule: from the structured fields, checked against the user's words when the
    server can read them; from the words alone when there are no fields."""
    if not fields.given():
        if not when.strip():
            raise ToolError(
                "say when: pass `when` (the user's words) and at / in_minutes / every / daily_at"
            )
        parsed = from_words(when)
        return _from_fields(replace(parsed, days=fields.days or parsed.days), now, tz)
    fields = _completed(fields, when, now, tz)
    spec = _from_fields(fields, now, tz)
    try:
        said = build_spec(Fields(days=fields.days if fields.daily_at else None), when, now, tz)
    except ToolError:
        return spec  # words the server cannot read (or no words): the fields stand
    if said.kind == "at" and said.first is not None and said.first - now < timedelta(minutes=1):
        # Words that read as this very minute name no time a reminder is for, any more than
        # "now" does (which reads as none): a small model copies the clock the prompt shows
        # into `when` beside the `in_minutes` the person asked for (the 0.5B model did in 3
        # of 9 minutes tried, then lost its way after the refusal). The fields stand.
        return spec
    if not _same(said, spec):
        raise ToolError(
            f"the user's words {when.strip()!r} read as {describe(said)}, but the fields say "
            f"{describe(spec)} ({tz.key}): ask the user which they mean, or pass fields that "
            "match their words"
        )
    return spec


def _completed(fields: Fields, when: str, now: datetime, tz: ZoneInfo) -> Fields:
    """A bare time of day in `at` with the user's words that give no time of their own
    ("tomorrow", "every day"): the words at that time. The 1.5B model passed `when`
    "tomorrow" (and "every day") beside `at` "09:00", which alone is today (and once)."""
    only_at = fields.at is not None and not (fields.in_minutes or fields.every or fields.daily_at)
    if not only_at or not when.strip() or not re.fullmatch(CLOCK, str(fields.at).strip()):
        return fields
    try:
        from_words(when)
        return fields  # the words have a time of their own: checked against the fields
    except ToolError:
        pass
    try:
        together = from_words(f"{when} at {fields.at}")
        _from_fields(together, now, tz)
    except ToolError:  # words that are no time ("after dinner"): the fields stand
        return fields
    return together


def _same(a: Spec, b: Spec) -> bool:
    if (a.kind, a.every_s, a.at_time) != (b.kind, b.every_s, b.at_time):
        return False
    if a.kind == "cron":
        return a.days == b.days
    assert a.first is not None and b.first is not None
    return abs(a.first - b.first) <= timedelta(minutes=1)


def _from_fields(fields: Fields, now: datetime, tz: ZoneInfo) -> Spec:
    kinds = fields.timing()
    if fields.every is not None:
        every_s = parse_every(fields.every)
        if fields.daily_at is not None or fields.in_minutes is not None:
            raise ToolError("`every` goes alone (or with `at` as its first run)")
        first = parse_at(fields.at, now, tz) if fields.at else now + timedelta(seconds=every_s)
        return Spec("every", tz, first=first.replace(microsecond=0), every_s=every_s)
    if len(kinds) > 1:
        raise ToolError(
            f"nothing created: {' and '.join(kinds)} each set the time, so only one may be "
            "given. Call schedule again now with just one of them"
        )
    if fields.daily_at is not None:
        return Spec("cron", tz, at_time=parse_clock(fields.daily_at),
                    days=parse_days(fields.days or "daily"))  # fmt: skip
    if fields.in_minutes is not None:
        if not 1 <= fields.in_minutes <= 60 * 24 * 366:
            raise ToolError("in_minutes must be between 1 and 527040 (a year)")
        return Spec("at", tz, first=(now + timedelta(minutes=fields.in_minutes)).replace(
            microsecond=0))  # fmt: skip
    assert fields.at is not None
    return Spec("at", tz, first=parse_at(fields.at, now, tz))
