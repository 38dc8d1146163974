"""When sessions split, in which zone: the scheduler's settings (SESSION_*, TIMEZONE)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, field_validator

if TYPE_CHECKING:
    from bot.sessions.policy import SessionPolicy


class SessionSettings(BaseModel):
    timezone: str = "UTC"
    session_split: Literal["daily", "weekly", "none"] = "daily"
    session_split_time: str = "00:00"

    @field_validator("timezone")
    @classmethod
    def _check_tz(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(f"unknown IANA time zone {value!r} (e.g. Europe/Berlin)") from exc
        return value

    @field_validator("session_split_time")
    @classmethod
    def _check_hhmm(cls, value: str) -> str:
        m = re.fullmatch(r"([01]?\d|2[0-3]):([0-5]\d)", value.strip())
        if not m:
            raise ValueError("must be HH:MM, e.g. 04:00")
        return f"{int(m.group(1)):02d}:{m.group(2)}"

    @property
    def tz(self) -> ZoneInfo:
        return ZoneInfo(self.timezone)

    @property
    def session_policy(self) -> SessionPolicy:
        """Asked on every message: parsed once per distinct (zone, period, time)."""
        from bot.sessions.policy import policy_for  # policy.py imports this module

        return policy_for(self.timezone, self.session_split, self.session_split_time)
