"""The dashboard's SQL: its sign-in tokens, and who a token or a Telegram id is."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import delete, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from bot.dashboard.models import DashboardToken
from db.models.core import ToolCallRecord, User


@dataclass(frozen=True)
class Person:
    user_id: int
    telegram_id: int | None
    name: str
    timezone: str | None


def _person(u: User) -> Person:
    return Person(u.id, u.telegram_id, u.name, u.timezone)


async def add(
    s: AsyncSession, user_id: int, kind: str, digest: str, now: datetime, expires: datetime
) -> None:
    s.add(
        DashboardToken(
            user_id=user_id, kind=kind, digest=digest, created_at=now, expires_at=expires
        )
    )


async def use_link(s: AsyncSession, digest: str, now: datetime) -> int | None:
    """The link's user, marking it used in the same statement: of two clicks racing, one
    wins. None: unknown, used or expired."""
    t = DashboardToken
    stmt = (
        update(t)
        .where(t.digest == digest, t.kind == "link", t.used_at.is_(None), t.expires_at > now)
        .values(used_at=now)
        .returning(t.user_id)
    )
    return (await s.execute(stmt)).scalar_one_or_none()


async def session_user(s: AsyncSession, digest: str, now: datetime) -> Person | None:
    t = DashboardToken
    stmt = (
        select(User)
        .join(t, t.user_id == User.id)
        .where(t.digest == digest, t.kind == "session", t.expires_at > now)
    )
    u = (await s.execute(stmt)).scalar_one_or_none()
    return _person(u) if u is not None else None


async def drop(s: AsyncSession, digest: str) -> None:
    await s.execute(delete(DashboardToken).where(DashboardToken.digest == digest))


async def drop_user(s: AsyncSession, user_id: int) -> None:
    await s.execute(delete(DashboardToken).where(DashboardToken.user_id == user_id))


async def drop_expired(s: AsyncSession, now: datetime) -> None:
    await s.execute(delete(DashboardToken).where(DashboardToken.expires_at <= now))


async def by_telegram_id(s: AsyncSession, telegram_id: int) -> Person | None:
    u = (await s.execute(select(User).where(User.telegram_id == telegram_id))).scalar_one_or_none()
    return _person(u) if u is not None else None


async def record_change(
    s: AsyncSession, user_id: int, request_id: str, arguments: str, result: str, ok: bool,
    duration_ms: float, now: datetime,
) -> None:  # fmt: skip
    """A change made in the dashboard, in the audit trail a chat's tool calls are in."""
    row = ToolCallRecord(
        request_id=request_id, user_id=user_id, tool="dashboard", arguments=arguments,
        result=result, ok=ok, duration_ms=duration_ms, created_at=now,
    )  # fmt: skip
    s.add(row)
