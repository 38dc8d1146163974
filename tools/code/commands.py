"""/codestats and /codefailures as text plus Telegram entities, built directly; the chart.

No Markdown on the way: code goes into `pre` entities by offset, so backticks, `<`, `&`
or a stray fence in the user's code cannot break the message. Offsets and lengths are
UTF-16 code units, as Telegram counts them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from telegramify_markdown.entity import utf16_len

from tools.charts import DailySeries, bucket, day_range
from tools.code.models import CodeExecution
from tools.code.repo import CodeStats

CODE_PREVIEW = 500
STDERR_PREVIEW = 300
MAX_DAYS = 365
MAX_FAILURES = 20
STATS_USAGE = f"Usage: /codestats [days] (a whole number 1-{MAX_DAYS}, default 7)"
FAILURES_USAGE = f"Usage: /codefailures [n] (a whole number 1-{MAX_FAILURES}, default 5)"
OUTCOME_COLOURS = {"succeeded": "#4caf50", "failed": "#e53935", "timed out": "#fb8c00"}


@dataclass
class Rendered:
    text: str = ""
    entities: list[dict[str, Any]] = field(default_factory=list)
    execution_id: int | None = None  # the run a "full report" button refers to

    def add(self, text: str, kind: str | None = None, language: str | None = None) -> None:
        if kind and text:
            ent: dict[str, Any] = {
                "type": kind,
                "offset": utf16_len(self.text),
                "length": utf16_len(text),
            }
            if language:
                ent["language"] = language
            self.entities.append(ent)
        self.text += text


def parse_bounded(arg: str | None, default: int, high: int) -> int | None:
    """The optional integer argument, or None when it is not a number in 1..high."""
    if arg is None or not arg.strip():
        return default
    raw = arg.strip()
    if not raw.isdigit():
        return None
    value = int(raw)
    return value if 1 <= value <= high else None


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.0f} ms" if value < 10_000 else f"{value / 1000:.1f} s"


def stats_message(st: CodeStats, days: int) -> Rendered:
    out = Rendered()
    out.add(f"Code runs, last {days} day{'s' if days != 1 else ''}", "bold")
    if st.total == 0:
        out.add("\nNo runs yet in this period.")
        return out
    rate = 100 * st.succeeded / st.total
    out.add(f"\nTotal: {st.total}\nSucceeded: {st.succeeded} ({rate:.0f}%)\nFailed: {st.failed}")
    out.add(f"\nDuration: average {_ms(st.avg_ms)}, p95 {_ms(st.p95_ms)}")
    if st.categories:
        out.add("\nTop errors: ")
        out.add(", ".join(f"{cat} {n}" for cat, n in st.categories[:5]))
    return out


def _clip(text: str, limit: int) -> str:
    if not text.strip():
        return "(empty)"
    return text if len(text) <= limit else text[:limit] + "…"


def failure_message(row: CodeExecution, tz: ZoneInfo) -> Rendered:
    out = Rendered(execution_id=row.id)
    when = row.created_at.astimezone(tz).strftime("%Y-%m-%d %H:%M")
    out.add(f"#{row.id}", "bold")
    exit_part = f"exit {row.exit_code}" if row.exit_code is not None else "no exit code"
    out.add(f" · {row.error_category or 'failed'} · {when} · {exit_part} · {_ms(row.duration_ms)}")
    out.add("\nCode:\n")
    out.add(_clip(row.code, CODE_PREVIEW), "pre", "typescript")
    out.add("\nStderr:\n")
    out.add(_clip(row.stderr, STDERR_PREVIEW), "pre")
    return out


def failures_messages(rows: list[CodeExecution], tz: ZoneInfo) -> list[Rendered]:
    """One message per failure (five full previews would pass Telegram's 4096 limit)."""
    if not rows:
        return [Rendered(text="No failed code runs. 🎉")]
    return [failure_message(r, tz) for r in rows]


def full_report(row: CodeExecution, tz: ZoneInfo) -> tuple[str, bytes]:
    """The whole run as a text file: what the button sends."""
    when = row.created_at.astimezone(tz).strftime("%Y-%m-%d %H:%M:%S %Z")
    parts = [
        f"Run #{row.id} · {row.error_category or 'ok'} · {when}",
        f"exit code {row.exit_code} · {row.duration_ms:.0f} ms · sandbox {row.sandbox_mode}",
        "",
        "===== code =====",
        row.code,
        "",
        "===== stdout =====" + (" (truncated)" if row.stdout_truncated else ""),
        row.stdout,
        "",
        "===== stderr =====" + (" (truncated)" if row.stderr_truncated else ""),
        row.stderr,
    ]
    return f"code-run-{row.id}.txt", "\n".join(parts).encode("utf-8")


def window_start(now: datetime, days: int) -> datetime:
    return now - timedelta(days=days)


def runs_series(
    rows: list[tuple[datetime, bool, str | None]], now: datetime, tz: ZoneInfo, days: int
) -> DailySeries:
    """Code runs per day split by outcome."""

    def outcome(ok: bool, category: str | None) -> str:
        return "succeeded" if ok else "timed out" if category == "timeout" else "failed"

    span = day_range(now, tz, days)
    parts = bucket(span, tz, ((at, outcome(ok, cat), 1.0) for at, ok, cat in rows))
    ordered = {k: parts[k] for k in OUTCOME_COLOURS if k in parts}
    return DailySeries(f"Code runs per day (last {days} days)", "runs", span, ordered,
                       dict(OUTCOME_COLOURS))  # fmt: skip
