"""Schedule times: the user's words and fields → specs, DST rules, catch-up, quiet hours."""

from __future__ import annotations

from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest

from tools.base import ToolError
from tools.reminders.parse import Fields, build_spec, parse_at, parse_days, parse_every
from tools.reminders.times import (
    WORKDAYS,
    Spec,
    catch_up,
    describe,
    local_instant,
    next_after,
    quiet_until,
)

BERLIN = ZoneInfo("Europe/Berlin")
NY = ZoneInfo("America/New_York")
NOW = datetime(2026, 11, 23, 9, 30, tzinfo=UTC)  # Monday, 10:30 in Berlin


def local(dt: datetime | None, tz: ZoneInfo) -> str:
    assert dt is not None
    return dt.astimezone(tz).strftime("%a %Y-%m-%d %H:%M %Z")


@pytest.mark.parametrize(
    ("words", "kind", "expect"),
    [
        ("in 20 minutes", "at", "Mon 2026-11-23 10:50 CET"),
        ("tomorrow at 9", "at", "Tue 2026-11-24 09:00 CET"),
        ("at 18:30", "at", "Mon 2026-11-23 18:30 CET"),
        ("friday 10am", "at", "Fri 2026-11-27 10:00 CET"),
        ("on 2026-12-01 at 7:15 pm", "at", "Tue 2026-12-01 19:15 CET"),
        ("every 2 hours", "every", "every 2 hours"),
        ("every 30 minutes starting at 11:00", "every", "every 30 minutes"),
        ("every weekday at 8", "cron", "daily at 08:00 on weekdays"),
        ("daily at 08:00 on weekdays", "cron", "daily at 08:00 on weekdays"),
        ("every day at 7:30", "cron", "daily at 07:30 every day"),
        ("mondays 9am", "cron", "daily at 09:00 on Mon"),
        ("every monday and wednesday at 18:00", "cron", "daily at 18:00 on Mon, Wed"),
    ],
)
def test_natural_phrasings(words: str, kind: str, expect: str) -> None:
    spec = build_spec(Fields(), words, NOW, BERLIN)
    assert spec.kind == kind
    shown = local(spec.first, BERLIN) if kind == "at" else describe(spec)
    assert shown == expect


def test_structured_fields_win_and_are_local_wall_clock() -> None:
    spec = build_spec(Fields(at="2026-11-24 09:00"), "tomorrow morning", NOW, NY)
    assert spec.first == datetime(2026, 11, 24, 14, 0, tzinfo=UTC)  # 09:00 EST
    spec = build_spec(Fields(daily_at="08:00", days="mon-fri"), "", NOW, BERLIN)
    assert (spec.kind, spec.at_time, spec.days) == ("cron", time(8, 0), WORKDAYS)


def test_past_time_today_suggests_tomorrow() -> None:
    with pytest.raises(ToolError) as err:
        build_spec(Fields(at="09:00"), "at 9", NOW, BERLIN)
    assert str(err.value).startswith(
        "that time has passed today (it is 10:30 in Europe/Berlin now): "
        "did you mean tomorrow 09:00?"
    )
    with pytest.raises(ToolError, match="2026-11-20 09:00 is in the past"):
        parse_at("2026-11-20 09:00", NOW, BERLIN)
    # The suggestion works as given.
    assert parse_at("tomorrow 09:00", NOW, BERLIN) == datetime(2026, 11, 24, 8, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("fields", "words", "message"),
    [
        (Fields(at="2026-11-24T09:00:00Z"), "", "without an offset"),
        (Fields(at="2026-11-24 09:00+01:00"), "", "without an offset"),
        (Fields(), "sometime soon", "could not read a time"),
        (Fields(), "", "say when"),
        (Fields(at="25:00"), "", "not a time of day"),
        (Fields(at="2026-02-30 09:00"), "", "not a real date"),
        (Fields(every="1 day"), "", "use daily_at"),
        (Fields(every="10 seconds"), "", "minutes or hours"),
        (Fields(daily_at="08:00", days="funday"), "", "days are weekdays"),
        (Fields(at="10:00", daily_at="08:00"), "", "at and daily_at each set the time"),
        (Fields(in_minutes=0), "", "in_minutes must be"),
        (Fields(at="2040-01-01 09:00"), "", "five years"),
    ],
)
def test_bad_times_are_clear_errors(fields: Fields, words: str, message: str) -> None:
    with pytest.raises(ToolError, match=message):
        build_spec(fields, words, NOW, BERLIN)


def test_days_and_intervals() -> None:
    assert parse_days("weekends") == 0b1100000
    assert parse_days("fri-mon") == 0b1110001
    assert parse_days("Tue, Thu") == 0b0001010
    assert parse_every("90 minutes") == 5400 and parse_every("2h") == 7200


@pytest.mark.parametrize(
    ("tz", "gap_day", "repeat_day", "gap_utc", "repeat_utc"),
    [
        # Berlin: 02:00→03:00 on Mar 29, 03:00→02:00 on Oct 25 (2026).
        (BERLIN, date(2026, 3, 29), date(2026, 10, 25), "01:00", "00:30"),
        # New York: 02:00→03:00 on Mar 8, 02:00→01:00 on Nov 1 (2026).
        (NY, date(2026, 3, 8), date(2026, 11, 1), "07:00", "05:30"),
    ],
)
def test_dst_gap_runs_right_after_and_repeat_runs_once(
    tz: ZoneInfo, gap_day: date, repeat_day: date, gap_utc: str, repeat_utc: str
) -> None:
    # 02:30 does not exist on the spring-forward night: it runs at 03:00, the gap's end.
    gap = local_instant(gap_day, time(2, 30), tz)
    assert gap.strftime("%H:%M") == gap_utc and gap.astimezone(tz).strftime("%H:%M") == "03:00"
    # A repeated wall time (02:30 in Berlin, 01:30 in New York) is its first occurrence.
    at = time(2, 30) if tz is BERLIN else time(1, 30)
    assert local_instant(repeat_day, at, tz).strftime("%H:%M") == repeat_utc
    # A daily job at that time runs once per local day through both nights.
    spec = Spec("cron", tz, at_time=at if tz is NY else time(2, 30))
    for day in (gap_day, repeat_day):
        start = datetime.combine(day - timedelta(days=1), time(12), tzinfo=tz)
        runs = [next_after(spec, start)]
        while len(runs) < 3:
            runs.append(next_after(spec, runs[-1]))  # type: ignore[arg-type]
        assert [r.astimezone(tz).date() for r in runs if r] == [
            day,
            day + timedelta(days=1),
            day + timedelta(days=2),
        ]


def test_catch_up_folds_missed_runs_into_one() -> None:
    spec = Spec("cron", BERLIN, at_time=time(7, 0), days=WORKDAYS)
    first = local_instant(date(2026, 11, 19), time(7, 0), BERLIN)  # Thursday
    now = datetime(2026, 11, 23, 9, 30, tzinfo=UTC)  # Monday 10:30
    c = catch_up(spec, first, now)
    assert local(c.due, BERLIN) == "Mon 2026-11-23 07:00 CET"
    assert c.missed == 2  # Thursday and Friday (the weekend has no run)
    assert local(c.next, BERLIN) == "Tue 2026-11-24 07:00 CET"
    every = Spec("every", BERLIN, first=first, every_s=3600)
    c = catch_up(every, first, first + timedelta(hours=5, minutes=10))
    assert (c.due - first, c.missed, c.next - first) == (  # type: ignore[operator]
        timedelta(hours=5),
        5,
        timedelta(hours=6),
    )


def test_quiet_hours_wrap_midnight() -> None:
    start, end = time(22, 0), time(7, 0)
    at = datetime(2026, 11, 23, 22, 30, tzinfo=BERLIN)
    assert local(quiet_until(at, BERLIN, start, end), BERLIN) == "Tue 2026-11-24 07:00 CET"
    at = datetime(2026, 11, 24, 6, 59, tzinfo=BERLIN)
    assert local(quiet_until(at, BERLIN, start, end), BERLIN) == "Tue 2026-11-24 07:00 CET"
    assert quiet_until(datetime(2026, 11, 24, 7, 0, tzinfo=BERLIN), BERLIN, start, end) is None
    assert (
        quiet_until(datetime(2026, 11, 24, 12, tzinfo=BERLIN), BERLIN, time(13), time(14)) is None
    )


def test_fields_that_contradict_the_users_words_are_refused() -> None:
    early = datetime(2026, 11, 23, 6, 0, tzinfo=UTC)  # 07:00 in Berlin
    # The model computed the wrong day for "tomorrow".
    with pytest.raises(ToolError) as err:
        build_spec(Fields(at="2026-11-25 09:00"), "tomorrow at 9", early, BERLIN)
    assert str(err.value) == (
        "the user's words 'tomorrow at 9' read as once at 2026-11-24 09:00, but the fields say "
        "once at 2026-11-25 09:00 (Europe/Berlin): ask the user which they mean, or pass "
        "fields that match their words"
    )
    # "at 9" at 07:00 is ambiguous when the model picked the evening: ask.
    with pytest.raises(ToolError, match="read as once at 2026-11-23 09:00, but the fields say"):
        build_spec(Fields(at="21:00"), "at 9", early, BERLIN)
    with pytest.raises(ToolError, match="read as daily at 09:00 on Mon, but the fields say once"):
        build_spec(Fields(at="2026-11-30 09:00"), "every monday at 9", early, BERLIN)
    # Agreeing fields, and words the server cannot read, pass.
    assert build_spec(Fields(at="21:00"), "at 9pm", early, BERLIN).kind == "at"
    assert build_spec(Fields(in_minutes=90), "in 90 minutes", early, BERLIN).kind == "at"
    spec = build_spec(Fields(daily_at="08:00", days="mon-fri"), "weekdays at 8", early, BERLIN)
    assert spec.days == WORKDAYS
    assert build_spec(Fields(at="19:30"), "after dinner", early, BERLIN).kind == "at"
    # Words that read as this very minute (the clock the prompt shows, copied) are no time a
    # reminder is for, as "now" is none: the fields stand.
    for words in ("2026-11-23 07:00", "now"):
        spec = build_spec(Fields(in_minutes=30), words, early, BERLIN)
        assert spec.first == early + timedelta(minutes=30), words
