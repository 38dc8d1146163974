"""When a conversation's period ends: the sessions' settings (SESSION_SPLIT, TIMEZONE), the
SessionPolicy parsed from them once, and the period arithmetic it answers with.

Every "which zone is this user in" and "is this session's period over" question goes
through one SessionPolicy (the runner, /newsession, /sessions, the terminal, the
split job and doctor), so the rule cannot drift between copies.

The arithmetic is pure functions over aware datetimes. Boundaries are wall-clock times (the
time of SESSION_SPLIT) in the user's time zone, so a "day" is 23 or 25 hours long across a
daylight-saving change. All arithmetic is done on local *dates* and every result is
converted to UTC before it is compared: comparing two aware datetimes that share a ZoneInfo
compares wall-clock time and ignores the offset, which is wrong around DST changes.

A wall-clock boundary that does not exist (inside a spring-forward gap) is read with
fold=0, i.e. with the offset in force before the change, which lands just after the gap
(02:30 on a 02:00→03:00 night is 03:30 local). A boundary that happens twice (fall-back)
is its first occurrence.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Literal, cast
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, field_validator

from tools.reminders.times import parse_hhmm

Split = Literal["daily", "weekly", "none"]

# Weekly periods start on Monday (ISO weeks).
WEEK_START = 0

SPLIT_SHAPE = "must be daily, weekly or none, with an optional HH:MM (e.g. daily 04:00)"


def parse_split(value: str) -> str:
    """`daily`, `weekly`, `none` (or `off`), the first two with an optional `HH:MM`, as one
    normal form: `daily 04:00`, `weekly 00:00`, `none`. ValueError otherwise."""
    m = re.fullmatch(
        r"(daily|weekly|none|off)(?:\s+(?:at\s+)?([01]?\d|2[0-3]):([0-5]\d))?",
        value.strip().lower(),
    )
    if not m:
        raise ValueError(SPLIT_SHAPE)
    period = "none" if m.group(1) == "off" else m.group(1)
    if period == "none":
        return "none"
    hour, minute = (int(m.group(2)), m.group(3)) if m.group(2) else (0, "00")
    return f"{period} {hour:02d}:{minute}"


class SessionSettings(BaseModel):
    timezone: str = "UTC"
    # When a conversation is closed and summarised: the period and the wall-clock time in
    # each user's zone, one value (SESSION_SPLIT_TIME was the time on its own).
    session_split: str = "daily 00:00"

    @field_validator("timezone")
    @classmethod
    def _check_tz(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"unknown IANA time zone {value!r} (e.g. Europe/Berlin)") from exc
        return value

    @field_validator("session_split")
    @classmethod
    def _check_split(cls, value: str) -> str:
        return parse_split(value)

    @property
    def split_period(self) -> Split:
        return cast("Split", self.session_split.split()[0])

    @property
    def split_time(self) -> str:
        """HH:MM of the split (00:00 when sessions are not split)."""
        parts = self.session_split.split()
        return parts[1] if len(parts) > 1 else "00:00"

    @property
    def tz(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    @property
    def session_policy(self) -> SessionPolicy:
        """Asked on every message: parsed once per distinct (zone, period, time)."""
        return policy_for(self.timezone, self.split_period, self.split_time)


@dataclass(frozen=True)
class SessionPolicy:
    """The settings parsed once: the default zone, the split period and time. It is the
    calendar of the loop's TurnPolicy (tools/hooks.py Periods): asked when an open
    session's period ends."""

    default_tz: ZoneInfo
    split: Split
    at: time

    def zone(self, name: str | None) -> ZoneInfo:
        """A user's own zone, or the default when they have none (or a stored one went bad)."""
        from tools.base import user_tz  # the settings are read before the database layer

        return user_tz(name, self.default_tz)

    def is_due(self, started: datetime, now: datetime, zone_name: str | None) -> bool:
        """Whether a session that started at `started` has had its period end by `now`."""
        return is_due(started, now, self.zone(zone_name), self.split, self.at)

    def period_end(self, started: datetime, tz_name: str | None) -> datetime | None:
        """When the period of a session that started at `started` ends, in the user's zone
        (tools/hooks.py Periods asks once per open session and keeps the answer)."""
        return period_end(started, self.zone(tz_name), self.split, self.at)

    def next_split(self, now: datetime, zone: ZoneInfo) -> datetime | None:
        """The next split instant (UTC) in `zone`, or None when sessions are not split."""
        return period_end(now, zone, self.split, self.at)

    def describe(self) -> str:
        """'every day at 04:00', 'every week (Mondays) at 00:00', 'never'."""
        if self.split == "none":
            return "never"
        every = "day" if self.split == "daily" else "week (Mondays)"
        return f"every {every} at {self.at:%H:%M}"


@functools.lru_cache(maxsize=16)
def policy_for(timezone: str, split: Split, at: str) -> SessionPolicy:
    """The policy for validated settings values (a settings object is copied in tests, so
    the cache is keyed by the values, not by the object)."""
    return SessionPolicy(ZoneInfo(timezone), split, parse_hhmm(at))


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
