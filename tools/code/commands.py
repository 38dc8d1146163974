"""/codestats [days] (runs per day charted, OpenCode jobs below), /codefailures [n] (one
message per failed run, with a button that sends it as a file, then the failed jobs), and
that button. The answers are Markdown rendered into entities (never parse_mode), so `<`,
`&` or `*` in the user's code are text.
"""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from tools.charts import DailySeries, bucket, chart, day_range
from tools.code import repo
from tools.code.models import CodeExecution, CodeJob
from tools.code.repo import CodeStats, JobStats
from tools.feature import Answer, Button, CommandCall, Pressed, bounded, row_id

CODE_PREVIEW = 500
STDERR_PREVIEW = 300
MAX_DAYS = 365
MAX_FAILURES = 20
STATS_USAGE = f"Usage: /codestats [days] (a whole number 1-{MAX_DAYS}, default 7)"
FAILURES_USAGE = f"Usage: /codefailures [n] (a whole number 1-{MAX_FAILURES}, default 5)"
NO_FAILURES = "No failed code runs. 🎉"
FILE_BUTTON = "📄 Full code + output as a file"
OUTCOME_COLOURS = {"succeeded": "#4caf50", "failed": "#e53935", "timed out": "#fb8c00"}


def _ms(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:.0f} ms" if value < 10_000 else f"{value / 1000:.1f} s"


def fenced(text: str, language: str = "") -> str:
    """A Markdown code block holding `text` exactly: its fence is longer than any run of
    backticks in it, so nothing inside can close it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{text}\n{fence}"


def stats_text(st: CodeStats, days: int) -> str:
    out = f"**Code runs, last {days} day{'s' if days != 1 else ''}**"
    if st.total == 0:
        return out + "\nNo runs yet in this period."
    rate = 100 * st.succeeded / st.total
    out += f"\nTotal: {st.total}\nSucceeded: {st.succeeded} ({rate:.0f}%)\nFailed: {st.failed}"
    out += f"\nDuration: average {_ms(st.avg_ms)}, p95 {_ms(st.p95_ms)}"
    if st.categories:
        out += "\nTop errors: " + ", ".join(f"{cat} {n}" for cat, n in st.categories[:5])
    return out


def jobs_text(js: JobStats) -> str:
    """The OpenCode jobs of the period, below the runs (nothing when there were none)."""
    if js.total == 0:
        return ""
    return (
        f"\n\n**Code jobs (OpenCode)**\nTotal: {js.total}\nDone: {js.done}"
        f"\nFailed or stopped: {js.total - js.done}"
        f"\nAverage: {_ms(js.avg_ms)}, {js.avg_steps or 0:.1f} steps"
    )


def skills_text(runs: list[tuple[str, int, int]]) -> str:
    """The runs of skills' scripts among them, by skill and script (tools/skills)."""
    if not runs:
        return ""
    lines = [f"{what}: {n} ({ok} ok)" for what, n, ok in runs[:10]]
    return "\n\n**Skills' scripts**\n" + "\n".join(lines)


def job_failure_answer(job: CodeJob, tz: ZoneInfo) -> Answer:
    when = job.created_at.astimezone(tz).strftime("%Y-%m-%d %H:%M")
    files = job.files.splitlines()
    text = "\n".join([
        f"**job {job.id}** · {job.status} · {when} · {job.steps} steps · {_ms(job.duration_ms)}",
        f"Model: {job.model or '-'}",
        "Task:",
        fenced(_clip(job.task, CODE_PREVIEW)),
        f"Why: {job.error or '-'}",
        f"Files: {', '.join(files[:10]) if files else 'none'}",
    ])  # fmt: skip
    return Answer(text, markdown=True)


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


def _clip(text: str, limit: int) -> str:
    if not text.strip():
        return "(empty)"
    return text if len(text) <= limit else text[:limit] + "…"


def failure_text(row: CodeExecution, tz: ZoneInfo) -> str:
    when = row.created_at.astimezone(tz).strftime("%Y-%m-%d %H:%M")
    exit_part = f"exit {row.exit_code}" if row.exit_code is not None else "no exit code"
    head = f"**#{row.id}** · {row.error_category or 'failed'} · {when} · {exit_part}"
    return "\n".join([
        f"{head} · {_ms(row.duration_ms)}",
        "Code:",
        fenced(_clip(row.code, CODE_PREVIEW), "typescript"),
        "Stderr:",
        fenced(_clip(row.stderr, STDERR_PREVIEW)),
    ])  # fmt: skip


def failure_answer(row: CodeExecution, tz: ZoneInfo) -> Answer:
    button = Button(FILE_BUTTON, f"file:{row.id}")
    return Answer(failure_text(row, tz), buttons=((button,),), markdown=True)


def failures_answer(
    rows: list[CodeExecution], tz: ZoneInfo, jobs: list[CodeJob] | None = None
) -> Answer:
    """One message per failure (five full previews would pass Telegram's 4096 limit): the
    runs, then the OpenCode jobs that failed or were interrupted."""
    answers = [failure_answer(r, tz) for r in rows]

    answers += [job_failure_answer(j, tz) for j in jobs or ()]
    if not answers:
        return Answer(NO_FAILURES)
    first, *rest = answers
    return replace(first, more=tuple(rest))


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


async def codestats(call: CommandCall) -> Answer | str:
    days = bounded(call.args, 7, MAX_DAYS)
    if days is None:
        return STATS_USAGE
    deps, user_id = call.host.deps, call.who.user_id
    now = deps.clock()
    since = now - timedelta(days=days)
    async with deps.session_factory() as s:
        st = await repo.stats(s, user_id, since)
        js = await repo.job_stats(s, user_id, since)
        skills = await repo.skill_runs(s, user_id, since)
    series = runs_series(st.runs, now, call.who.tz, days)
    text = stats_text(st, days) + jobs_text(js) + skills_text(skills)
    return Answer(text, markdown=True, chart=lambda: chart(series))


async def codefailures(call: CommandCall) -> Answer | str:
    n = bounded(call.args, 5, MAX_FAILURES)
    if n is None:
        return FAILURES_USAGE
    async with call.host.deps.session_factory() as s:
        rows = await repo.last_failures(s, call.who.user_id, n)
        jobs = await repo.failed_jobs(s, call.who.user_id, n)
    return failures_answer(rows, call.who.tz, jobs)


async def press(call: CommandCall) -> Pressed:
    """The button under a failure: that run (code, stdout, stderr) as a file; the message
    stays as it is."""
    kind, _, number = call.args.partition(":")
    run_id = row_id(number)
    if kind != "file" or run_id is None:
        return Pressed("That button is out of date.", alert=True)
    async with call.host.deps.session_factory() as s:
        row = await repo.get_execution(s, run_id, call.who.user_id)
    if row is None:
        return Pressed("That run is not in your history.", alert=True)
    return Pressed("", Answer("", file=full_report(row, call.who.tz)))
