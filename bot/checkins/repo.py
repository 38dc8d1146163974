"""The check-ins' SQL: a person's choices, the groups asked for, the claim of a slot, the
ledger."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from bot.checkins.models import CheckinGroup, CheckinPrefs, CheckinRun
from bot.usage.models import ModelUsage
from db.models.core import User


async def prefs(s: AsyncSession, user_id: int) -> CheckinPrefs:
    """The person's choices; a new row (off, the defaults) the first time."""
    row = await s.get(CheckinPrefs, user_id)
    if row is None:
        row = CheckinPrefs(user_id=user_id)  # the model's defaults, set by the flush
        s.add(row)
        await s.flush()
    return row


async def enabled(s: AsyncSession) -> list[tuple[CheckinPrefs, User]]:
    stmt = (
        select(CheckinPrefs, User)
        .join(User, User.id == CheckinPrefs.user_id)
        .where(CheckinPrefs.enabled.is_(True))
    )
    return [(p, u) for p, u in (await s.execute(stmt)).all()]


async def enabled_groups(s: AsyncSession) -> list[tuple[CheckinGroup, CheckinPrefs, User]]:
    """The groups with a brief on, each with the choices of the member who asked for it."""
    stmt = (
        select(CheckinGroup, CheckinPrefs, User)
        .join(User, User.id == CheckinGroup.user_id)
        .join(CheckinPrefs, CheckinPrefs.user_id == CheckinGroup.user_id)
        .where(CheckinGroup.enabled.is_(True))
    )
    return [(g, p, u) for g, p, u in (await s.execute(stmt)).all()]


async def group(s: AsyncSession, chat_id: int) -> tuple[CheckinGroup, User] | None:
    """The group's brief and the member who asked for it; None: nobody asked there."""
    stmt = (
        select(CheckinGroup, User)
        .join(User, User.id == CheckinGroup.user_id)
        .where(CheckinGroup.chat_id == chat_id)
    )
    row = (await s.execute(stmt)).one_or_none()
    return None if row is None else (row[0], row[1])


async def ask_in_group(
    s: AsyncSession, chat_id: int, user_id: int, brief_at: str, now: datetime
) -> CheckinGroup:
    """A member asked for the group's brief: it is theirs from now on (their quiet hours,
    cap and budget), on, at the time it had (or `brief_at`, the first time)."""
    row = await s.get(CheckinGroup, chat_id)
    if row is None:
        row = CheckinGroup(chat_id=chat_id, user_id=user_id, brief_at=brief_at, created_at=now)
        s.add(row)
    else:
        row.user_id, row.enabled = user_id, True
    await s.flush()
    return row


async def group_off(s: AsyncSession, chat_id: int) -> None:
    await s.execute(
        update(CheckinGroup).where(CheckinGroup.chat_id == chat_id).values(enabled=False)
    )


async def claim(
    s: AsyncSession, user_id: int, day: str, slot: str, now: datetime, chat_id: int = 0
) -> int | None:
    """The new run's id, or None when that day's slot was claimed before for this chat (before
    a restart, or by another worker): the unique row is the guard."""
    run = CheckinRun(
        user_id=user_id, chat_id=chat_id, day=day, slot=slot, status="running", started_at=now
    )
    try:
        async with s.begin_nested():
            s.add(run)
            await s.flush()
    except IntegrityError:
        return None
    return run.id


async def sent_today(s: AsyncSession, user_id: int, day: str, chat_id: int = 0) -> int:
    """The person's check-ins sent today in that chat (the daily cap is per chat)."""
    stmt = select(func.count()).where(
        CheckinRun.user_id == user_id,
        CheckinRun.chat_id == chat_id,
        CheckinRun.day == day,
        CheckinRun.status == "sent",
    )
    return int((await s.execute(stmt)).scalar_one())


async def finish(s: AsyncSession, run_id: int, **values: Any) -> None:
    await s.execute(update(CheckinRun).where(CheckinRun.id == run_id).values(**values))


async def scheduled_cost(s: AsyncSession, user_id: int, since: datetime, until: datetime) -> float:
    """What the person's scheduled model calls cost between two instants (a run's own)."""
    stmt = select(func.coalesce(func.sum(ModelUsage.cost_usd), 0.0)).where(
        ModelUsage.user_id == user_id,
        ModelUsage.purpose == "scheduled",
        ModelUsage.at >= since,
        ModelUsage.at <= until,
    )
    return float((await s.execute(stmt)).scalar_one() or 0.0)


async def month_summary(s: AsyncSession, user_id: int, month: str) -> dict[str, Any]:
    """This month's runs by status, and what they cost."""
    stmt = (
        select(CheckinRun.status, func.count(), func.coalesce(func.sum(CheckinRun.cost_usd), 0.0))
        .where(CheckinRun.user_id == user_id, CheckinRun.day.startswith(month))
        .group_by(CheckinRun.status)
    )
    rows = (await s.execute(stmt)).all()
    return {
        "counts": {status: int(n) for status, n, _ in rows},
        "cost": sum(float(c or 0.0) for *_, c in rows),
    }


async def run_of(s: AsyncSession, run_id: int, user_id: int) -> CheckinRun | None:
    run = await s.get(CheckinRun, run_id)
    return run if run is not None and run.user_id == user_id else None


async def previous_failed(s: AsyncSession, user_id: int, run_id: int, chat_id: int = 0) -> bool:
    """Whether the run before this one in that chat failed too (its failure was told already)."""
    stmt = (
        select(CheckinRun.status)
        .where(
            CheckinRun.user_id == user_id,
            CheckinRun.chat_id == chat_id,
            CheckinRun.id < run_id,
            CheckinRun.status.in_(("sent", "nothing", "failed")),
        )
        .order_by(CheckinRun.id.desc())
        .limit(1)
    )
    return (await s.execute(stmt)).scalar_one_or_none() == "failed"


async def last_cost(s: AsyncSession, user_id: int) -> float:
    """What the person's last check-in that called the model cost (0: none yet)."""
    stmt = (
        select(CheckinRun.cost_usd)
        .where(CheckinRun.user_id == user_id, CheckinRun.cost_usd.is_not(None))
        .order_by(CheckinRun.id.desc())
        .limit(1)
    )
    return float((await s.execute(stmt)).scalar_one_or_none() or 0.0)
