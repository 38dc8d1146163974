"""Model usage rows: recording a call, period totals, the /usage chart's rows, and users'
model and footer choices."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import (
    ColumnElement,
    Table,
    bindparam,
    case,
    func,
    insert,
    literal,
    select,
    update,
)
from sqlalchemy.ext.asyncio import AsyncSession

from bot.usage.models import ModelUsage
from db.models.core import User

TABLE: Table = ModelUsage.__table__  # type: ignore[assignment]
INSERT = insert(TABLE)


async def add_usage(s: AsyncSession, **values: Any) -> None:
    """One model call's row, in the caller's transaction (the one that stores the answer):
    a Core INSERT on the session's connection, cheaper than the ORM's insert path."""
    await (await s.connection()).execute(INSERT, values)


@dataclass
class Group:
    """Totals of the calls of one model for one purpose."""

    model: str
    purpose: str
    calls: int
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    reasoning_tokens: int
    estimated_calls: int
    cost_usd: float  # of the priced calls only
    unpriced_calls: int
    written_calls: int = 0  # tool calls the model wrote out as text


async def groups(
    s: AsyncSession,
    *,
    since: datetime | None = None,
    user_id: int | None = None,
    session_id: int | None = None,
    by: Literal["model", "purpose", "both", "none"] = "both",
) -> list[Group]:
    """Totals by model and purpose (`by`: one of them, or "none" for one total row),
    optionally for one user, one session, since a time."""
    found, _ = await _grouped(s, by, None, _scoped_where(since, user_id, session_id))
    return found


async def top_groups(
    s: AsyncSession,
    *,
    limit: int,
    since: datetime | None = None,
    user_id: int | None = None,
    session_id: int | None = None,
    by: Literal["model", "purpose", "both"] = "model",
) -> tuple[list[Group], int]:
    """The `limit` groups that cost most (then the busiest), and how many groups there are
    in all, from one pass over the rows (a window count over the groups): the database
    aggregates, so a table with thousands of model names is never read into the process."""
    return await _grouped(s, by, limit, _scoped_where(since, user_id, session_id))


async def _grouped(
    s: AsyncSession,
    by: Literal["model", "purpose", "both", "none"],
    limit: int | None,
    where: list[ColumnElement[bool]],
) -> tuple[list[Group], int]:
    u = ModelUsage
    keys = {"model": [u.model], "purpose": [u.purpose], "both": [u.model, u.purpose]}.get(by, [])
    cost = func.coalesce(func.sum(u.cost_usd), 0.0)
    calls = func.count(u.id)
    stmt = select(
        u.model if by in ("model", "both") else literal(""),
        u.purpose if by in ("purpose", "both") else literal(""),
        calls,
        func.coalesce(func.sum(u.prompt_tokens), 0),
        func.coalesce(func.sum(u.completion_tokens), 0),
        func.coalesce(func.sum(u.cached_tokens), 0),
        func.coalesce(func.sum(u.reasoning_tokens), 0),
        func.coalesce(func.sum(case((u.estimated, 1), else_=0)), 0),
        cost,
        func.coalesce(func.sum(case((u.cost_usd.is_(None), 1), else_=0)), 0),
        func.coalesce(func.sum(u.written_calls), 0),
        func.count().over() if limit is not None else literal(0),
    ).where(*where)
    if keys:
        stmt = stmt.group_by(*keys)
    if limit is not None:
        stmt = stmt.order_by(cost.desc(), calls.desc(), *keys).limit(limit)
    else:
        stmt = stmt.order_by(*keys)
    rows = (await s.execute(stmt)).all()
    found = [
        Group(
            model=str(r[0]),
            purpose=str(r[1]),
            calls=int(r[2]),
            prompt_tokens=int(r[3]),
            completion_tokens=int(r[4]),
            cached_tokens=int(r[5]),
            reasoning_tokens=int(r[6]),
            estimated_calls=int(r[7] or 0),
            cost_usd=float(r[8] or 0.0),
            unpriced_calls=int(r[9] or 0),
            written_calls=int(r[10] or 0),
        )
        for r in rows
    ]
    # An aggregate over no rows is one row of zeros: no calls is no group.
    return [g for g in found if g.calls], int(rows[0][11]) if limit is not None and rows else 0


def _scoped_where(
    since: datetime | None, user_id: int | None, session_id: int | None
) -> list[ColumnElement[bool]]:
    u = ModelUsage
    where: list[ColumnElement[bool]] = []
    if since is not None:
        where.append(u.at >= since)
    if user_id is not None:
        where.append(u.user_id == user_id)
    if session_id is not None:
        where.append(u.session_id == session_id)
    return where


@dataclass
class Spent:
    """What the budgets are checked against: USD since the day and month started, and each
    user's tokens over the same periods."""

    day_usd: float
    month_usd: float
    user_tokens: dict[int, tuple[int, int]]  # user id -> (tokens today, tokens this month)


async def spent(s: AsyncSession, day_start: datetime, month_start: datetime) -> Spent:
    u = ModelUsage
    tokens = u.prompt_tokens + u.completion_tokens
    since = min(day_start, month_start)
    today = u.at >= day_start
    stmt = (
        select(
            u.user_id,
            func.coalesce(func.sum(case((today, u.cost_usd), else_=0.0)), 0.0),
            func.coalesce(func.sum(case((u.at >= month_start, u.cost_usd), else_=0.0)), 0.0),
            func.coalesce(func.sum(case((today, tokens), else_=0)), 0),
            func.coalesce(func.sum(case((u.at >= month_start, tokens), else_=0)), 0),
        )
        .where(u.at >= since)
        .group_by(u.user_id)
    )
    out = Spent(0.0, 0.0, {})
    for user_id, day_usd, month_usd, day_tokens, month_tokens in await s.execute(stmt):
        out.day_usd += float(day_usd)
        out.month_usd += float(month_usd)
        if user_id is not None:
            out.user_tokens[int(user_id)] = (int(day_tokens), int(month_tokens))
    return out


async def last_request(
    s: AsyncSession, user_id: int, purposes: tuple[str, ...]
) -> list[ModelUsage]:
    """The model calls of the user's newest request (of these purposes), in order."""
    newest = (
        select(ModelUsage.request_id)
        .where(
            ModelUsage.user_id == user_id,
            ModelUsage.purpose.in_(purposes),
            ModelUsage.request_id.is_not(None),
        )
        # The (user_id, at) index read backwards: the newest call first, not every one.
        .order_by(ModelUsage.at.desc(), ModelUsage.id.desc())
        .limit(1)
        .scalar_subquery()
    )
    stmt = (
        select(ModelUsage)
        .where(
            ModelUsage.user_id == user_id,
            ModelUsage.request_id == newest,
            ModelUsage.purpose.in_(purposes),
        )
        .order_by(ModelUsage.id)
    )
    return list((await s.execute(stmt)).scalars())


@dataclass(frozen=True)
class UserUsage:
    """What metering reads of a user's row: their /model pick, the footer, the budget
    warnings given this period."""

    llm_model: str | None
    usage_footer: bool
    usage_warned: str | None


_USER_USAGE = select(User.llm_model, User.usage_footer, User.usage_warned).where(
    User.id == bindparam("user_id")
)


async def user_usage(s: AsyncSession, user_id: int) -> UserUsage:
    row = (await s.execute(_USER_USAGE, {"user_id": user_id})).first()
    return UserUsage(*row) if row is not None else UserUsage(None, False, None)


async def set_model(s: AsyncSession, user_id: int, model: str | None) -> None:
    await s.execute(update(User).where(User.id == user_id).values(llm_model=model))


async def set_footer(s: AsyncSession, user_id: int, on: bool) -> None:
    await s.execute(update(User).where(User.id == user_id).values(usage_footer=on))


async def usage_rows(
    s: AsyncSession, user_id: int | None, since: datetime
) -> list[tuple[datetime, str, int, float | None]]:
    """(when, purpose, tokens in + out, USD or None) of model calls since `since`, for the
    /usage chart (bucketed by day in tools/charts.py); `user_id` None: everyone's."""
    stmt = select(
        ModelUsage.at,
        ModelUsage.purpose,
        ModelUsage.prompt_tokens + ModelUsage.completion_tokens,
        ModelUsage.cost_usd,
    ).where(ModelUsage.at >= since)
    if user_id is not None:
        stmt = stmt.where(ModelUsage.user_id == user_id)
    return [(r[0], str(r[1]), int(r[2] or 0), r[3]) for r in (await s.execute(stmt)).all()]


async def daily(s: AsyncSession, user_id: int, starts: list[datetime]) -> list[tuple[int, float]]:
    """(tokens in + out, USD) of the user's calls in each period from `starts[i]` to
    `starts[i + 1]` (the last to now): the database buckets them, for the dashboard's days."""
    if not starts:
        return []
    u = ModelUsage
    bucket = case(*((u.at >= at, i) for i, at in reversed(list(enumerate(starts)))), else_=-1)
    stmt = (
        select(
            bucket,
            func.coalesce(func.sum(u.prompt_tokens + u.completion_tokens), 0),
            func.coalesce(func.sum(u.cost_usd), 0.0),
        )
        .where(u.user_id == user_id, u.at >= starts[0])
        .group_by(bucket)
    )
    out = [(0, 0.0)] * len(starts)
    for i, tokens, cost in (await s.execute(stmt)).all():
        if 0 <= int(i) < len(starts):
            out[int(i)] = (int(tokens or 0), float(cost or 0.0))
    return out
