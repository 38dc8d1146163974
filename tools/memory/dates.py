"""Dates a recall query names ("on 3 June, 2023", "in May 2023", "2023-06-03", "yesterday"),
as a time span, so memories made at that time can rank higher.

A memory's date is when it was stored (`created_at`): what was said on a day is stored that
day. On LoCoMo (bench/memory_recall.py) a quarter of the single-hop misses named the day of
the conversation they asked about.
"""

from __future__ import annotations

import calendar
import re
from datetime import datetime, timedelta

MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
MONTHS |= {name.lower(): i for i, name in enumerate(calendar.month_abbr) if name}
_MONTH = "|".join(sorted(MONTHS, key=len, reverse=True))
# "3 June, 2023", "June 3, 2023", "June 2023", "June 3rd 2023"
_NAMED = re.compile(
    rf"\b(?:(\d{{1,2}})(?:st|nd|rd|th)?\s+)?({_MONTH})\.?"
    rf"(?:\s+(\d{{1,2}})(?:st|nd|rd|th)?)?,?\s+(\d{{4}})\b",
    re.IGNORECASE,
)
_ISO = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
_RELATIVE = {"today": 0, "yesterday": 1}


def _day(year: int, month: int, day: int, tz: object) -> tuple[datetime, datetime] | None:
    try:
        start = datetime(year, month, day, tzinfo=tz)  # type: ignore[arg-type]
    except ValueError:
        return None
    return start, start + timedelta(days=1)


def query_span(text: str, now: datetime) -> tuple[datetime, datetime] | None:
    """The first date `text` names, as [start, end) in `now`'s time zone; None if none."""
    tz = now.tzinfo
    m = _ISO.search(text)
    if m:
        return _day(int(m.group(1)), int(m.group(2)), int(m.group(3)), tz)
    m = _NAMED.search(text)
    if m:
        year, month = int(m.group(4)), MONTHS[m.group(2).lower()]
        day = m.group(1) or m.group(3)
        if day:
            return _day(year, month, int(day), tz)
        start = datetime(year, month, 1, tzinfo=tz)
        end = datetime(year + month // 12, month % 12 + 1, 1, tzinfo=tz)
        return start, end
    for word, back in _RELATIVE.items():
        if re.search(rf"\b{word}\b", text, re.IGNORECASE):
            day = (now - timedelta(days=back)).replace(hour=0, minute=0, second=0, microsecond=0)
            return day, day + timedelta(days=1)
    return None
