"""Session periods: when a session that started at some instant is due to be split.

Pure functions over aware datetimes. Boundaries are wall-clock times (the time of SESSION_SPLIT)
in the user's time zone, so a "day" is 23 or 25 hours long across a daylight-saving
change. All arithmetic is done on local *dates* and every result is converted to UTC
before it is compared: comparing two aware datetimes that share a ZoneInfo compares
wall-clock time and ignores the offset, which is wrong around DST changes.

A wall-clock boundary that does not exist (inside a spring-forward gap) is read with
fold=0, i.e. with the offset in force before the change, which lands just after the gap
(02:30 on a 02:00→03:00 night is 03:30 local). A boundary that happens twice (fall-back)
is its first occurrence.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

Split = Literal["daily", "weekly", "none"]

# Weekly periods start on Monday (ISO weeks).
WEEK_START = 0


def user_tz(name: str | None, default: ZoneInfo) -> ZoneInfo:
    """A user's own zone, or the default when they have none (or a stored one went bad)."""
    try:
        return ZoneInfo(name) if name else default
    except (ZoneInfoNotFoundError, ValueError):
        return default


def _aware(dt: datetime) -> datetime:
    if dt.tzinfo is None:
        raise ValueError("naive datetime: pass an aware one (UTC)")
    return dt


def boundary_on(day: date, at: time, tz: ZoneInfo) -> datetime:
    """The split instant on local `day` at wall-clock `at`, in UTC."""
    return datetime.combine(day, at, tzinfo=tz).astimezone(UTC)


def _first_day(local_day: date, split: Split) -> date:
    """The local date whose boundary starts the period containing `local_day`'s boundary."""
    if split == "weekly":
        return local_day - timedelta(days=(local_day.weekday() - WEEK_START) % 7)
    return local_day


def period_end(started: datetime, tz: ZoneInfo, split: Split, at: time) -> datetime | None:
    """The first boundary strictly after `started` (UTC): when that session is due, or
    after `now`, the next split (for /sessions and doctor)."""
    if split == "none":
        return None
    started = _aware(started).astimezone(UTC)
    day = _first_day(started.astimezone(tz).date(), split)
    b = boundary_on(day, at, tz)
    while b <= started:
        day += timedelta(days=7 if split == "weekly" else 1)
        b = boundary_on(day, at, tz)
    return b


def is_due(started: datetime, now: datetime, tz: ZoneInfo, split: Split, at: time) -> bool:
    """True when the session that started at `started` belongs to a period that has ended."""
    end = period_end(started, tz, split, at)
    return end is not None and end <= _aware(now).astimezone(UTC)
