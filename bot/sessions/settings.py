"""When sessions split, in which zone: the scheduler's settings (SESSION_SPLIT, TIMEZONE)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, cast
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, field_validator

from bot.sessions.periods import Split

if TYPE_CHECKING:
    from bot.sessions.policy import SessionPolicy

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
        from bot.sessions.policy import policy_for  # policy.py imports this module

        return policy_for(self.timezone, self.split_period, self.split_time)
