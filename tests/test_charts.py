"""Day buckets of the /codestats and /usage charts (tools/charts.py)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from tools.charts import render_png, usage_series
from tools.code.commands import runs_series

NOW = datetime(2026, 11, 25, 1, 30, tzinfo=UTC)
BERLIN = ZoneInfo("Europe/Berlin")


def test_runs_are_split_by_outcome_per_local_day() -> None:
    rows = [
        (NOW, True, None),
        (NOW - timedelta(hours=2), False, "syntax"),  # 00:30 Berlin (UTC+1): today
        (NOW - timedelta(hours=3), False, "timeout"),  # 23:30 Berlin: yesterday
        (NOW - timedelta(days=30), True, None),  # outside the window
    ]
    s = runs_series(rows, NOW, BERLIN, 3)
    assert [d.isoformat() for d in s.days] == ["2026-11-23", "2026-11-24", "2026-11-25"]
    assert s.parts == {
        "succeeded": [0, 0, 1],
        "failed": [0, 0, 1],
        "timed out": [0, 1, 0],
    }


def test_usage_is_spend_when_priced_and_tokens_otherwise() -> None:
    priced = [(NOW, "chat", 1000, 0.002), (NOW, "speech", 20, 0.0003)]
    s = usage_series(priced, NOW, BERLIN, 2)
    assert s.unit == "USD" and s.parts["chat"] == [0, 0.002]
    assert s.parts["voice replies (characters)"] == [0, 0.0003]
    mixed = [(NOW, "chat", 1000, 0.002), (NOW, "archive", 50, None)]
    s = usage_series(mixed, NOW, BERLIN, 2)
    assert s.unit == "tokens" and s.parts == {"archive summary": [0, 50], "chat": [0, 1000]}
    assert usage_series([], NOW, BERLIN, 2).empty


def test_render_makes_a_png() -> None:
    png = render_png(runs_series([(NOW, True, None)], NOW, BERLIN, 7))
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
