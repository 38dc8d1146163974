"""Reminders fire at the user's wall-clock time across both DST changes, in Berlin and New
York: ticks one minute early see nothing, ticks on time deliver exactly once, through the
real Bot API client to the fake Telegram. The expected instants are worked out by hand."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from tests.e2e.conftest import OWNER, TG
from tests.e2e.reminders_env import Env, make_env

BERLIN, NY = "Europe/Berlin", "America/New_York"
MINUTE, HOUR = timedelta(minutes=1), timedelta(hours=1)


def utc(value: str) -> datetime:
    return datetime.fromisoformat(value).replace(tzinfo=UTC)


async def run_timeline(env: Env, steps: list[tuple[str, list[str]]]) -> None:
    for when, expected in steps:
        got = await env.tick_at(utc(when))
        assert sorted(got) == sorted(expected), when


ONE_SHOTS = {
    # zone: (gap wall time, its UTC, repeated wall time, first and second occurrence in UTC)
    BERLIN: ("2026-03-29 02:30", "2026-03-29 01:00", "2026-10-25 02:30",
             "2026-10-25 00:30", "2026-10-25 01:30"),
    NY: ("2026-03-08 02:30", "2026-03-08 07:00", "2026-11-01 01:30",
         "2026-11-01 05:30", "2026-11-01 06:30"),
}  # fmt: skip


@pytest.mark.parametrize("zone", [BERLIN, NY])
async def test_one_shot_in_the_gap_runs_after_it_and_a_repeated_time_once(
    tg: TG, zone: str
) -> None:
    gap, gap_utc, repeat, first, second = ONE_SHOTS[zone]
    env = make_env(tg, utc("2026-03-01 12:00"))
    user = await env.user(OWNER, zone)
    await env.job(user, zone, "gap", at=gap)
    await env.job(user, zone, "repeat", at=repeat)
    await run_timeline(
        env,
        [
            (f"{gap_utc[:11]}00:00", []),
            (_minus_minute(gap_utc), []),
            (gap_utc, ["⏰ gap"]),
            (_minus_minute(first), []),
            (first, ["⏰ repeat"]),
            (second, []),  # the same wall time again: not a second run
            ("2026-11-03 12:00", []),
        ],
    )
    runs = await env.runs()
    assert [(r.status, r.message_id is not None) for r in runs] == [("sent", True)] * 2
    local = [r.due_at.astimezone(ZoneInfo(zone)).strftime("%H:%M") for r in runs]
    assert local == ["03:00", repeat[-5:]]


def _minus_minute(value: str) -> str:
    return (utc(value) - MINUTE).strftime("%Y-%m-%d %H:%M")


CRON = {
    # Weekdays at 08:00 local. Spring: Fri before and Mon after the change; fall likewise.
    # `wrong` is 08:00 in the other offset: a bot off by the DST hour would fire there.
    BERLIN: {
        "created": "2026-03-26 12:00",
        "spring": [("2026-03-27 07:00", True), ("2026-03-28 07:00", False),
                   ("2026-03-29 06:00", False), ("2026-03-30 06:00", True),
                   ("2026-03-30 07:00", False)],
        "jump": "2026-10-22 12:00",
        "fall": [("2026-10-23 06:00", True), ("2026-10-26 06:00", False),
                 ("2026-10-26 07:00", True)],
    },
    NY: {
        "created": "2026-03-04 18:00",
        "spring": [("2026-03-05 13:00", True), ("2026-03-06 13:00", True),
                   ("2026-03-07 13:00", False), ("2026-03-09 12:00", True),
                   ("2026-03-09 13:00", False)],
        "jump": "2026-10-29 18:00",
        "fall": [("2026-10-30 12:00", True), ("2026-11-02 12:00", False),
                 ("2026-11-02 13:00", True)],
    },
}  # fmt: skip


@pytest.mark.parametrize("zone", [BERLIN, NY])
async def test_weekday_cron_keeps_local_time_across_both_changes(tg: TG, zone: str) -> None:
    case = CRON[zone]
    env = make_env(tg, utc(case["created"]))  # type: ignore[arg-type]
    user = await env.user(OWNER, zone)
    job = await env.job(user, zone, "standup", when="every weekday at 8", daily_at="08:00",
                        days="weekdays")  # fmt: skip
    steps: list[tuple[str, list[str]]] = []
    for when, fires in case["spring"]:  # type: ignore[attr-defined]
        steps += [(_minus_minute(when), []), (when, ["⏰ standup"] if fires else [])]
    await run_timeline(env, steps)
    # Down from spring to autumn: one late delivery for all the runs missed, not hundreds.
    late = await env.tick_at(utc(case["jump"]))  # type: ignore[arg-type]
    assert len(late) == 1
    assert late[0].startswith("⏰ standup\n(late: was due 08:00; ")
    assert "earlier runs missed while I was down)" in late[0]
    steps = []
    for when, fires in case["fall"]:  # type: ignore[attr-defined]
        steps += [(_minus_minute(when), []), (when, ["⏰ standup"] if fires else [])]
    await run_timeline(env, steps)
    assert (await env.get_job(job.id)).status == "active"


INTERVAL = {
    # Every hour from 23:00 local the night of the change: elapsed hours, so local times
    # skip the missing hour in spring and repeat one in autumn.
    (BERLIN, "spring"): ("2026-03-28 23:00", "2026-03-28 22:00",
                         ["23:00", "00:00", "01:00", "03:00", "04:00"]),
    (BERLIN, "fall"): ("2026-10-24 23:00", "2026-10-24 21:00",
                       ["23:00", "00:00", "01:00", "02:00", "02:00", "03:00"]),
    (NY, "spring"): ("2026-03-07 23:00", "2026-03-08 04:00",
                     ["23:00", "00:00", "01:00", "03:00", "04:00"]),
    (NY, "fall"): ("2026-10-31 23:00", "2026-11-01 03:00",
                   ["23:00", "00:00", "01:00", "01:00", "02:00"]),
}  # fmt: skip


@pytest.mark.parametrize(("zone", "season"), list(INTERVAL))
async def test_interval_counts_elapsed_time_across_dst(tg: TG, zone: str, season: str) -> None:
    start_local, start_utc, hours = INTERVAL[(zone, season)]
    first = utc(start_utc)
    env = make_env(tg, first - 6 * HOUR)
    user = await env.user(OWNER, zone)
    await env.job(user, zone, "stretch", every="1h", at=start_local)
    for n in range(len(hours)):
        assert await env.tick_at(first + n * HOUR - MINUTE) == []
        assert await env.tick_at(first + n * HOUR) == ["⏰ stretch"]
    runs = await env.runs()
    assert [r.due_at.astimezone(ZoneInfo(zone)).strftime("%H:%M") for r in runs] == hours
