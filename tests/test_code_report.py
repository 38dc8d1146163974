"""Formatting of /codestats and /codefailures: Markdown as Telegram's adapter renders it
(entities by UTF-16 offset), hostile text intact."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest
from telegramify_markdown.entity import utf16_len

from bot.telegram.render import render
from tools.code import commands as report
from tools.code.models import CodeExecution
from tools.code.repo import CodeStats, percentile
from tools.feature import bounded


def row(**kw: object) -> CodeExecution:
    base: dict[str, object] = {
        "id": 17,
        "code": "console.log(1)",
        "stderr": "TypeError: x",
        "stdout": "",
        "exit_code": 1,
        "duration_ms": 12.4,
        "error_category": "type",
        "created_at": datetime(2026, 1, 2, 3, 4, tzinfo=UTC),
        "sandbox_mode": "bwrap",
        "stdout_truncated": False,
        "stderr_truncated": False,
    }
    base.update(kw)
    return CodeExecution(**base)


@dataclass
class Shown:
    """One message as Telegram shows it."""

    text: str
    entities: list[dict[str, object]]


def shown(markdown: str) -> Shown:
    [(text, entities)] = render(markdown)  # one message
    return Shown(text, [e.model_dump(exclude_none=True) for e in entities])


def failure_message(r: CodeExecution, tz: ZoneInfo) -> Shown:
    return shown(report.failure_text(r, tz))


def entity_text(r: Shown, ent: dict[str, object]) -> str:
    raw = r.text.encode("utf-16-le")
    start, length = int(ent["offset"]), int(ent["length"])  # type: ignore[call-overload]
    return raw[start * 2 : (start + length) * 2].decode("utf-16-le")


@pytest.mark.parametrize(
    "code",
    [
        "```\nconsole.log('`')\n```",
        "const a = 1 < 2 && 3 > 2; // <b>&amp;</b>",
        "const e = '😀𝔘'; console.log(e)",  # astral chars: 2 UTF-16 units each
        "   ",
    ],
)
def test_failure_blocks_hold_exactly_the_code(code: str) -> None:
    r = failure_message(row(code=code, stderr="é😀 <err> & `x`"), ZoneInfo("UTC"))
    pres = [e for e in r.entities if e["type"] == "pre"]
    assert len(pres) == 2 and pres[0]["language"] == "typescript"
    expected = code if code.strip() else "(empty)"
    assert entity_text(r, pres[0]) == expected
    assert entity_text(r, pres[1]) == "é😀 <err> & `x`"
    assert entity_text(r, r.entities[0]) == "#17"


def test_long_code_and_stderr_are_cut_for_the_preview() -> None:
    r = failure_message(row(code="a" * 2000, stderr="b" * 2000), ZoneInfo("UTC"))
    pres = [e for e in r.entities if e["type"] == "pre"]
    assert entity_text(r, pres[0]) == "a" * 500 + "…"
    assert entity_text(r, pres[1]) == "b" * 300 + "…"
    assert utf16_len(r.text) < 4096


def test_failure_time_is_in_the_users_zone() -> None:
    r = failure_message(row(), ZoneInfo("Asia/Tokyo"))
    assert "2026-01-02 12:04" in r.text and "type" in r.text and "exit 1" in r.text


def test_no_failures_is_one_friendly_message() -> None:
    msg = report.failures_answer([], ZoneInfo("UTC"))
    assert not msg.more and "No failed" in msg.text and not msg.buttons


def test_stats_text() -> None:
    st = CodeStats(10, 7, 3, 20.0, 55.0, [("syntax", 2), ("timeout", 1)])
    r = shown(report.stats_text(st, 1))
    assert "last 1 day\n" in r.text and "Total: 10" in r.text and "(70%)" in r.text
    assert "average 20 ms, p95 55 ms" in r.text and "syntax 2, timeout 1" in r.text
    assert "No runs" in report.stats_text(CodeStats(0, 0, 0, None, None, []), 7)


@pytest.mark.parametrize(
    ("arg", "expected"),
    [(None, 7), ("", 7), (" 30 ", 30), ("365", 365), ("0", None), ("366", None),
     ("-3", None), ("abc", None), ("1.5", None), ("7 days", None), ("²", None)],
)  # fmt: skip
def test_argument_parsing(arg: str | None, expected: int | None) -> None:
    assert bounded(arg, 7, 365) == expected


def test_percentile_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 95) == 95.0 and percentile([3.0], 95) == 3.0


def test_full_report_has_everything() -> None:
    name, data = report.full_report(
        row(code="x" * 5000, stdout="out", stdout_truncated=True), ZoneInfo("UTC")
    )
    body = data.decode()
    assert name == "code-run-17.txt" and "x" * 5000 in body
    assert "===== stdout ===== (truncated)" in body and "TypeError: x" in body
