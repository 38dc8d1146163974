"""Code executions and generation jobs."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Integer, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from tools.code.models import CodeExecution, CodeJob


async def add_execution(s: AsyncSession, **fields: Any) -> CodeExecution:
    row = CodeExecution(**fields)
    s.add(row)
    await s.flush()
    return row


async def get_execution(s: AsyncSession, execution_id: int, user_id: int) -> CodeExecution | None:
    """One of this user's runs (None for another user's id: ids are guessable)."""
    row = await s.get(CodeExecution, execution_id)
    return row if row is not None and row.user_id == user_id else None


@dataclass(frozen=True)
class CodeStats:
    total: int
    succeeded: int
    failed: int
    avg_ms: float | None
    p95_ms: float | None
    categories: list[tuple[str, int]]  # most frequent first
    runs: list[tuple[datetime, bool, str | None]] = field(default_factory=list)  # the chart's


async def stats(s: AsyncSession, user_id: int, since: datetime) -> CodeStats:
    stmt = select(
        CodeExecution.created_at,
        CodeExecution.success,
        CodeExecution.error_category,
        CodeExecution.duration_ms,
    ).where(CodeExecution.user_id == user_id, CodeExecution.created_at >= since)
    rows = (await s.execute(stmt)).all()
    durations = sorted(float(r.duration_ms) for r in rows)
    ok = sum(1 for r in rows if r.success)
    cats = Counter(r.error_category for r in rows if r.error_category is not None)
    return CodeStats(
        total=len(rows),
        succeeded=ok,
        failed=len(rows) - ok,
        avg_ms=sum(durations) / len(durations) if durations else None,
        p95_ms=percentile(durations, 95) if durations else None,
        categories=sorted(cats.items(), key=lambda c: (-c[1], c[0])),
        runs=[(r.created_at, bool(r.success), r.error_category) for r in rows],
    )


def percentile(sorted_values: list[float], pct: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    rank = max(1, -(-len(sorted_values) * pct // 100))
    return sorted_values[int(rank) - 1]


async def last_failures(s: AsyncSession, user_id: int, n: int) -> list[CodeExecution]:
    stmt = (
        select(CodeExecution)
        .where(CodeExecution.user_id == user_id, CodeExecution.success.is_(False))
        .order_by(CodeExecution.id.desc())
        .limit(n)
    )
    return list((await s.execute(stmt)).scalars())


async def add_job(s: AsyncSession, **fields: Any) -> CodeJob:
    job = CodeJob(**fields)
    s.add(job)
    await s.flush()
    return job


async def get_job(s: AsyncSession, job_id: str) -> CodeJob | None:
    return await s.get(CodeJob, job_id)


async def finish_job(
    s: AsyncSession,
    job_id: str,
    *,
    status: str,
    now: datetime,
    code: str | None = None,
    error: str | None = None,
    **trace: Any,
) -> None:
    """Settle a pending job; a job already settled (e.g. interrupted) stays as it is.
    `trace`: an OpenCode job's steps, duration_ms, files and summary."""
    await s.execute(
        update(CodeJob)
        .where(CodeJob.id == job_id, CodeJob.status == "pending")
        .values(status=status, code=code, error=error, finished_at=now, **trace)
    )


async def undelivered(s: AsyncSession) -> list[CodeJob]:
    """Settled OpenCode jobs whose result the user has not been sent yet."""
    stmt = (
        select(CodeJob)
        .where(
            CodeJob.generator == "opencode",
            CodeJob.status != "pending",
            CodeJob.delivered_at.is_(None),
        )
        .order_by(CodeJob.finished_at)
    )
    return list((await s.execute(stmt)).scalars())


async def claim_delivery(s: AsyncSession, job_id: str, now: datetime) -> bool:
    """Mark the job delivered; False when another worker claimed it first."""
    res = await s.execute(
        update(CodeJob)
        .where(CodeJob.id == job_id, CodeJob.delivered_at.is_(None))
        .values(delivered_at=now)
    )
    return int(res.rowcount or 0) == 1  # type: ignore[attr-defined]


@dataclass(frozen=True)
class JobStats:
    total: int
    done: int
    avg_ms: float | None
    avg_steps: float | None


async def job_stats(s: AsyncSession, user_id: int, since: datetime) -> JobStats:
    """The user's OpenCode jobs since `since` (the model generator's have no trace)."""
    stmt = select(CodeJob.status, CodeJob.duration_ms, CodeJob.steps).where(
        CodeJob.user_id == user_id,
        CodeJob.created_at >= since,
        CodeJob.generator == "opencode",
        CodeJob.status != "pending",
    )
    rows = (await s.execute(stmt)).all()
    n = len(rows)
    return JobStats(
        total=n,
        done=sum(1 for r in rows if r.status == "done"),
        avg_ms=sum(float(r.duration_ms) for r in rows) / n if n else None,
        avg_steps=sum(int(r.steps) for r in rows) / n if n else None,
    )


async def failed_jobs(s: AsyncSession, user_id: int, n: int) -> list[CodeJob]:
    stmt = (
        select(CodeJob)
        .where(
            CodeJob.user_id == user_id,
            CodeJob.generator == "opencode",
            CodeJob.status.in_(("failed", "interrupted")),
        )
        .order_by(CodeJob.created_at.desc())
        .limit(n)
    )
    return list((await s.execute(stmt)).scalars())


async def interrupt_orphans(s: AsyncSession, owner: str, now: datetime) -> int:
    """Pending jobs of earlier processes will never finish: mark them interrupted."""
    res = await s.execute(
        update(CodeJob)
        .where(CodeJob.status == "pending", CodeJob.owner != owner)
        .values(
            status="interrupted", error="the bot restarted before the job finished", finished_at=now
        )
    )
    return int(res.rowcount or 0)  # type: ignore[attr-defined]


# A skill's script run is traced with this reasoning (tools/skills/source.py), so /codestats
# can say which skill ran what.
SKILL_RUN = "skill "


async def skill_runs(s: AsyncSession, user_id: int, since: datetime) -> list[tuple[str, int, int]]:
    """(what ran: "skill <name>: <script>", runs, succeeded) of the period, most run first."""
    ok = func.sum(func.cast(CodeExecution.success, Integer))
    stmt = (
        select(CodeExecution.llm_reasoning, func.count(), ok)
        .where(
            CodeExecution.user_id == user_id,
            CodeExecution.created_at >= since,
            CodeExecution.llm_reasoning.startswith(SKILL_RUN),
        )
        .group_by(CodeExecution.llm_reasoning)
        .order_by(func.count().desc(), CodeExecution.llm_reasoning)
    )
    rows = (await s.execute(stmt)).all()
    return [(str(what)[len(SKILL_RUN) :], int(n), int(good or 0)) for what, n, good in rows]


async def recent_executions(
    s: AsyncSession, user_id: int, offset: int, limit: int
) -> tuple[list[CodeExecution], int]:
    """A page of the user's runs, newest first, and how many there are (the dashboard)."""
    where = CodeExecution.user_id == user_id
    total = int(await s.scalar(select(func.count(CodeExecution.id)).where(where)) or 0)
    newest = (CodeExecution.created_at.desc(), CodeExecution.id.desc())
    stmt = select(CodeExecution).where(where).order_by(*newest).offset(offset).limit(limit)
    return list((await s.execute(stmt)).scalars()), total
