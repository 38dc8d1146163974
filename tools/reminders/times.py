"""When a scheduled job runs: pure functions over aware datetimes and wall-clock specs.

A job's times are wall-clock times in its time zone; every result is an aware UTC
instant. Two daylight-saving rules, the same for every kind:
- a wall time that does not exist (spring-forward gap, e.g. 02:30 on a 02:00→03:00
  night) runs right after the gap, at the first instant that exists (03:00);
- a wall time that happens twice (fall-back) runs once, at its first occurrence.
Intervals (`every`) are elapsed time, so they are untouched by DST.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Literal
from zoneinfo import ZoneInfo

Kind = Literal["at", "every", "cron"]
WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
ALL_DAYS = 0b1111111
WORKDAYS = 0b0011111
WEEKEND = 0b1100000
MAX_CATCH_UP_DAYS = 4000  # bounds the day-by-day walk of a cron job (over 10 years down)


@dataclass(frozen=True)
class Spec:
    """A job's schedule: `at` one instant (`first`); `every` `first`, then every `every_s`
    seconds; `cron` `at_time` on the local days in `days` (bit 0 = Monday)."""

    kind: Kind
    tz: ZoneInfo
    first: datetime | None = None  # UTC
    every_s: int | None = None
    at_time: time | None = None
    days: int = ALL_DAYS


def local_instant(day: date, at: time, tz: ZoneInfo) -> datetime:
    """The UTC instant of wall time `at` on local `day`, with the two DST rules above."""
    first = datetime.combine(day, at, tzinfo=tz)  # fold=0: the first of a repeated time
    utc = first.astimezone(UTC)
    if utc.astimezone(tz).replace(tzinfo=None) == first.replace(tzinfo=None):
        return utc
    # Not a real wall time: find the end of the gap, between the reading with the offset
    # before the change (fold=1 lands before the gap) and the one after (fold=0, after it).
    lo = first.replace(fold=1).astimezone(UTC)
    hi = utc
    after = hi.astimezone(tz).utcoffset()
    while hi - lo > timedelta(seconds=1):
        mid = lo + (hi - lo) / 2
        if mid.astimezone(tz).utcoffset() == after:
            hi = mid
        else:
            lo = mid
    # Changes happen on whole seconds and lo < change <= hi < lo + 1 s: flooring is exact.
    return hi.replace(microsecond=0)


def _aware(dt: datetime) -> datetime:
    if dt.tzinfo is None:
        raise ValueError("naive datetime: pass an aware one (UTC)")
    return dt.astimezone(UTC)


def next_after(spec: Spec, after: datetime) -> datetime | None:
    """The first run strictly after `after` (UTC); None when there is none (a past one-shot)."""
    after = _aware(after)
    if spec.kind == "at":
        assert spec.first is not None
        return spec.first if spec.first > after else None
    if spec.kind == "every":
        assert spec.first is not None and spec.every_s
        if spec.first > after:
            return spec.first
        steps = int((after - spec.first).total_seconds() // spec.every_s) + 1
        return spec.first + timedelta(seconds=steps * spec.every_s)
    assert spec.at_time is not None and spec.days & ALL_DAYS
    day = after.astimezone(spec.tz).date()
    for _ in range(8):
        if spec.days >> day.weekday() & 1:
            run = local_instant(day, spec.at_time, spec.tz)
            if run > after:
                return run
        day += timedelta(days=1)
    raise AssertionError("a weekday mask with a day in it always matches within 8 days")


def first_run(spec: Spec, now: datetime) -> datetime | None:
    """When a new job first runs: its own first instant, else the next match after now."""
    if spec.kind in ("at", "every"):
        return spec.first
    return next_after(spec, now)


@dataclass(frozen=True)
class Catch:
    """What is due for a job at `now`: the newest due run and how many were missed before it."""

    due: datetime  # the newest run at or before now
    missed: int  # earlier runs folded into this one
    next: datetime | None  # the run after now


def catch_up(spec: Spec, next_run: datetime, now: datetime) -> Catch:
    """Fold every run from `next_run` up to `now` into one (a recurring job fires once)."""
    now = _aware(now)
    if spec.kind == "at":
        return Catch(next_run, 0, None)
    if spec.kind == "every":
        assert spec.every_s
        n = int((now - next_run).total_seconds() // spec.every_s)
        due = next_run + timedelta(seconds=n * spec.every_s)
        return Catch(due, n, due + timedelta(seconds=spec.every_s))
    due, missed = next_run, 0
    for _ in range(MAX_CATCH_UP_DAYS * 2):
        nxt = next_after(spec, due)
        assert nxt is not None
        if nxt > now:
            return Catch(due, missed, nxt)
        due, missed = nxt, missed + 1
    return Catch(due, missed, next_after(spec, now))


def describe(spec: Spec) -> str:
    """'once at 2026-11-24 09:00', 'every 2 hours', 'daily at 08:00 on weekdays'."""
    if spec.kind == "at":
        assert spec.first is not None
        return f"once at {spec.first.astimezone(spec.tz):%Y-%m-%d %H:%M}"
    if spec.kind == "every":
        assert spec.every_s
        for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
            if spec.every_s % size == 0:
                n = spec.every_s // size
                return f"every {unit}" if n == 1 else f"every {n} {unit}s"
        return f"every {spec.every_s} seconds"
    assert spec.at_time is not None
    named = {ALL_DAYS: "every day", WORKDAYS: "on weekdays", WEEKEND: "on weekends"}
    listed = ", ".join(WEEKDAYS[i].capitalize() for i in range(7) if spec.days >> i & 1)
    return f"daily at {spec.at_time:%H:%M} {named.get(spec.days, f'on {listed}')}"


def local_text(dt: datetime, tz: ZoneInfo, now: datetime | None = None) -> str:
    """'Tue 2026-11-24 09:00' in the zone; just '09:00' when it is on now's local date."""
    local = dt.astimezone(tz)
    if now is not None and now.astimezone(tz).date() == local.date():
        return f"{local:%H:%M}"
    return f"{local:%a %Y-%m-%d %H:%M}"


def in_quiet(t: time, start: time, end: time) -> bool:
    """Whether the wall time `t` is in the quiet hours start-end: start > end wraps midnight
    (22:00-07:00); start == end means no quiet hours."""
    if start == end:
        return False
    return start <= t < end if start < end else (t >= start or t < end)


def quiet_until(now: datetime, tz: ZoneInfo, start: time, end: time) -> datetime | None:
    """The end of the quiet period `now` is in (UTC), or None outside quiet hours."""
    local = _aware(now).astimezone(tz)
    t = local.time().replace(tzinfo=None)
    if not in_quiet(t, start, end):
        return None
    # In the evening part of hours that wrap midnight, they end tomorrow.
    days = 1 if start > end and t >= start else 0
    return local_instant(local.date() + timedelta(days=days), end, tz)


def parse_hhmm(value: str) -> time:
    """'4:05' / '04:05' → time(4, 5); ValueError otherwise."""
    m = re.fullmatch(r"\s*([01]?\d|2[0-3]):([0-5]\d)\s*", value)
    if not m:
        raise ValueError(f"not a HH:MM time: {value!r}")
    return time(int(m.group(1)), int(m.group(2)))
