"""The session policy, parsed once: the default zone, the split period and time.

Every "which zone is this user in" and "is this session's period over" question goes
through one SessionPolicy (the runner, /newsession, /sessions, the terminal, the
scheduler and doctor), so the rule cannot drift between copies.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import datetime, time
from zoneinfo import ZoneInfo

from bot.sessions.periods import Split, is_due, period_end, user_tz
from tools.reminders.times import parse_hhmm


@dataclass(frozen=True)
class SessionPolicy:
    default_tz: ZoneInfo
    split: Split
    at: time

    def zone(self, name: str | None) -> ZoneInfo:
        """A user's own zone, or the default when they have none (or a stored one went bad)."""
        return user_tz(name, self.default_tz)

    def is_due(self, started: datetime, now: datetime, zone_name: str | None) -> bool:
        """Whether a session that started at `started` has had its period end by `now`."""
        return is_due(started, now, self.zone(zone_name), self.split, self.at)

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
