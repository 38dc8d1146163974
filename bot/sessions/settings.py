"""When a conversation's period ends: SESSION_SPLIT and TIMEZONE, parsed once into the one
SessionPolicy every caller asks. Boundaries are wall-clock times in the user's zone, so a
"day" is 23 or 25 hours across DST: the arithmetic is on local dates, and results are
compared in UTC (aware datetimes sharing a ZoneInfo compare wall-clock time). A boundary in
a spring-forward gap is read with fold=0 (just after the gap); one that happens twice is
its first occurrence."""

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
    """The normal form (`daily 04:00`, `weekly 00:00`, `none`), or ValueError."""
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
        parts = self.session_split.split()
        return parts[1] if len(parts) > 1 else "00:00"

    @property
    def tz(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    @property
    def session_policy(self) -> SessionPolicy:
        return policy_for(self.timezone, self.split_period, self.split_time)


@dataclass(frozen=True)
class SessionPolicy:
    default_tz: ZoneInfo
    split: Split
    at: time

    def zone(self, name: str | None) -> ZoneInfo:
        from tools.base import user_tz  # the settings are read before the database layer

        return user_tz(name, self.default_tz)

    def is_due(self, started: datetime, now: datetime, zone_name: str | None) -> bool:
        return is_due(started, now, self.zone(zone_name), self.split, self.at)

    def period_end(self, started: datetime, tz_name: str | None) -> datetime | None:
        return period_end(started, self.zone(tz_name), self.split, self.at)

    def next_split(self, now: datetime, zone: ZoneInfo) -> datetime | None:
        return period_end(now, zone, self.split, self.at)

    def describe(self) -> str:
        if self.split == "none":
            return "never"
        every = "day" if self.split == "daily" else "week (Mondays)"
        return f"every {every} at {self.at:%H:%M}"


@functools.lru_cache(maxsize=16)
def policy_for(timezone: str, split: Split, at: str) -> SessionPolicy:
    # Keyed by the values, not the settings object (tests copy it).
    return SessionPolicy(ZoneInfo(timezone), split, parse_hhmm(at))


def _aware(dt: datetime) -> datetime:
    if dt.tzinfo is None:
        raise ValueError("naive datetime: pass an aware one (UTC)")
    return dt


def boundary_on(day: date, at: time, tz: ZoneInfo) -> datetime:
    return datetime.combine(day, at, tzinfo=tz).astimezone(UTC)


def period_end(started: datetime, tz: ZoneInfo, split: Split, at: time) -> datetime | None:
    """The first boundary strictly after `started` (UTC)."""
    if split == "none":
        return None
    started = _aware(started).astimezone(UTC)
    day = started.astimezone(tz).date()
    if split == "weekly":  # the week's first day
        day -= timedelta(days=(day.weekday() - WEEK_START) % 7)
    b = boundary_on(day, at, tz)
    while b <= started:
        day += timedelta(days=7 if split == "weekly" else 1)
        b = boundary_on(day, at, tz)
    return b


def is_due(started: datetime, now: datetime, tz: ZoneInfo, split: Split, at: time) -> bool:
    end = period_end(started, tz, split, at)
    return end is not None and end <= _aware(now).astimezone(UTC)
