"""Period boundaries: daily, weekly and none, in non-UTC zones, across DST changes."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest

from bot.sessions.settings import (
    is_due,
    period_end,
    policy_for,
)
from tools.hooks import Periods
from tools.reminders.times import parse_hhmm

BERLIN = ZoneInfo("Europe/Berlin")  # DST 2026: Mar 29 02:00→03:00, Oct 25 03:00→02:00
NEW_YORK = ZoneInfo("America/New_York")  # DST 2026: Mar 8, Nov 1
TOKYO = ZoneInfo("Asia/Tokyo")  # no DST
MIDNIGHT = time(0, 0)


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=UTC)  # type: ignore[misc]


def local(tz: ZoneInfo, *args: int, fold: int = 0) -> datetime:
    return datetime(*args, tzinfo=tz, fold=fold)  # type: ignore[misc]


def test_parse_hhmm() -> None:
    assert parse_hhmm("4:05") == time(4, 5)
    assert parse_hhmm(" 23:59 ") == time(23, 59)
    for bad in ["24:00", "7", "12:60", "ab:cd", ""]:
        with pytest.raises(ValueError):
            parse_hhmm(bad)


def test_daily_in_a_non_utc_zone() -> None:
    started = local(BERLIN, 2026, 11, 20, 14, 0)
    assert period_end(started, BERLIN, "daily", MIDNIGHT) == utc(2026, 11, 20, 23, 0)
    # Just before midnight Berlin time it is not due, at midnight it is.
    assert not is_due(started, utc(2026, 11, 20, 22, 59), BERLIN, "daily", MIDNIGHT)
    assert is_due(started, utc(2026, 11, 20, 23, 0), BERLIN, "daily", MIDNIGHT)
    # A split time later in the day: a session started before it ends the same day.
    at = time(4, 0)
    early = local(BERLIN, 2026, 11, 21, 2, 0)
    assert period_end(early, BERLIN, "daily", at) == local(BERLIN, 2026, 11, 21, 4, 0)
    late = local(BERLIN, 2026, 11, 21, 4, 0)  # exactly at the boundary: next day's
    assert period_end(late, BERLIN, "daily", at) == local(BERLIN, 2026, 11, 22, 4, 0)


def test_daily_across_spring_forward() -> None:
    # Berlin's night of Mar 28→29 2026 loses an hour: midnight is 23:00Z before the
    # change and 22:00Z after it; the day of the change lasts 23 hours.
    s1 = local(BERLIN, 2026, 3, 28, 12, 0)
    s2 = local(BERLIN, 2026, 3, 29, 12, 0)
    assert period_end(s1, BERLIN, "daily", MIDNIGHT) == utc(2026, 3, 28, 23, 0)
    assert period_end(s2, BERLIN, "daily", MIDNIGHT) == utc(2026, 3, 29, 22, 0)
    start = utc(2026, 3, 28, 23, 0)
    end = period_end(start, BERLIN, "daily", MIDNIGHT)
    assert end is not None and (end - start).total_seconds() == 23 * 3600
    # A split time inside the skipped hour (02:30 does not exist that night) still
    # happens once, right after the gap: 03:30 CEST = 01:30Z.
    at = time(2, 30)
    s = local(BERLIN, 2026, 3, 28, 20, 0)
    assert period_end(s, BERLIN, "daily", at) == utc(2026, 3, 29, 1, 30)
    after = period_end(utc(2026, 3, 29, 1, 30), BERLIN, "daily", at)
    assert after == utc(2026, 3, 30, 0, 30)  # 02:30 CEST the next night


def test_daily_across_fall_back() -> None:
    # Oct 25 2026 in Berlin lasts 25 hours; 02:30 happens twice: the split is the first.
    start = period_end(utc(2026, 10, 24, 12, 0), BERLIN, "daily", MIDNIGHT)
    end = period_end(utc(2026, 10, 25, 12, 0), BERLIN, "daily", MIDNIGHT)
    assert start == utc(2026, 10, 24, 22, 0) and end == utc(2026, 10, 25, 23, 0)
    assert (end - start).total_seconds() == 25 * 3600
    at = time(2, 30)
    s = local(BERLIN, 2026, 10, 24, 20, 0)
    assert period_end(s, BERLIN, "daily", at) == utc(2026, 10, 25, 0, 30)  # first 02:30
    # A session started in the repeated hour's second pass waits for the next night.
    second_pass = local(BERLIN, 2026, 10, 25, 2, 45, fold=1)  # 01:45Z
    assert period_end(second_pass, BERLIN, "daily", at) == utc(2026, 10, 26, 1, 30)


def test_weekly_starts_monday_and_spans_dst() -> None:
    # Week of Mon Oct 19 2026 → Mon Oct 26 (with the fall-back inside): 169 hours.
    s = local(NEW_YORK, 2026, 10, 28, 9, 0)  # a Wednesday
    assert period_end(s, NEW_YORK, "weekly", MIDNIGHT) == local(NEW_YORK, 2026, 11, 2, 0, 0)
    start = period_end(local(NEW_YORK, 2026, 10, 25, 9, 0), NEW_YORK, "weekly", MIDNIGHT)
    end = period_end(utc(2026, 11, 1, 12, 0), NEW_YORK, "weekly", MIDNIGHT)
    assert start == local(NEW_YORK, 2026, 10, 26, 0, 0)
    assert end == utc(2026, 11, 2, 5, 0)  # EST after the change
    assert start is not None and end is not None
    assert (end - start).total_seconds() == (7 * 24 + 1) * 3600
    # Monday before the split time still belongs to the previous week.
    at = time(6, 0)
    monday_early = local(NEW_YORK, 2026, 11, 2, 5, 0)
    assert period_end(monday_early, NEW_YORK, "weekly", at) == local(NEW_YORK, 2026, 11, 2, 6, 0)
    assert not is_due(s, utc(2026, 11, 2, 4, 59), NEW_YORK, "weekly", MIDNIGHT)
    assert is_due(s, utc(2026, 11, 2, 5, 0), NEW_YORK, "weekly", MIDNIGHT)


def test_none_never_splits() -> None:
    s = utc(2020, 1, 1)
    assert period_end(s, BERLIN, "none", MIDNIGHT) is None
    assert not is_due(s, utc(2030, 1, 1), BERLIN, "none", MIDNIGHT)


def test_same_instant_differs_per_zone() -> None:
    started = utc(2026, 11, 20, 10, 0)  # 19:00 in Tokyo, 05:00 in New York
    now = utc(2026, 11, 20, 16, 0)  # 01:00 next day in Tokyo, 11:00 in New York
    assert is_due(started, now, TOKYO, "daily", MIDNIGHT)
    assert not is_due(started, now, NEW_YORK, "daily", MIDNIGHT)


def test_end_always_after_now_and_periods_last_a_day_or_week() -> None:
    # Every 17 minutes over both 2026 DST changes in two zones, for two split times.
    for tz in (BERLIN, NEW_YORK):
        for at in (MIDNIGHT, time(2, 30)):
            for split in ("daily", "weekly"):
                for base in (utc(2026, 3, 6), utc(2026, 10, 23)):
                    for i in range(0, 60 * 24 * 4, 17):
                        now = base + timedelta(minutes=i)
                        end = period_end(now, tz, split, at)  # type: ignore[arg-type]
                        assert end is not None and now < end
                        after = period_end(end, tz, split, at)  # type: ignore[arg-type]
                        assert after is not None
                        hours = (after - end).total_seconds() / 3600
                        assert 22 <= hours <= 26 if split == "daily" else 167 <= hours <= 169


def test_naive_datetimes_are_refused() -> None:
    with pytest.raises(ValueError):
        period_end(datetime(2026, 1, 1), BERLIN, "daily", MIDNIGHT)


def test_a_kept_period_end_is_compared_with_each_turns_time() -> None:
    """The loop's Periods asks the sessions' calendar once per open session and keeps the
    end: a later turn past it still finds the period over, a change of zone asks again."""
    periods = Periods(policy_for("Europe/Berlin", "daily", "00:00"))
    started = utc(2026, 11, 20, 13, 0)
    assert not periods.period_over(utc(2026, 11, 20, 22, 59))(started, None)
    assert periods.period_over(utc(2026, 11, 20, 23, 0))(started, None)
    # Tokyo's midnight came first: 15:00 UTC.
    assert periods.period_over(utc(2026, 11, 20, 15, 0))(started, "Asia/Tokyo")
    assert not periods.period_over(utc(2026, 11, 20, 22, 59))(started, None)
