"""Approval questions, their decisions and the "always" grants. A question is a row from the
moment it is asked ("pending"), so a button press any worker receives can settle it, and
the first answer (a press, the timeout) is the one that stands."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import or_, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from bot.approvals.models import ApprovalDecision, ApprovalGrant
from db.engine import SessionFactory
from db.models.core import User

ACTION_LIMIT = 2000  # characters of the action kept in the audit
PENDING = "pending"
CLOSED = "closed"  # its person was removed before they answered


async def _grant(s: AsyncSession, user_id: int, tool: str) -> ApprovalGrant | None:
    stmt = select(ApprovalGrant).where(ApprovalGrant.user_id == user_id, ApprovalGrant.tool == tool)
    return (await s.scalars(stmt)).first()


async def granted(sf: SessionFactory, user_id: int, tool: str, scheduled: bool = False) -> bool:
    """Whether the user allowed `tool` for good: in chats, or (`scheduled`) in a scheduled
    task's run, which a grant given in a chat does not cover."""
    async with sf() as s:
        grant = await _grant(s, user_id, tool)
        return grant is not None and (grant.scheduled or not scheduled)


async def grants(sf: SessionFactory, user_id: int) -> list[ApprovalGrant]:
    async with sf() as s:
        stmt = select(ApprovalGrant).where(ApprovalGrant.user_id == user_id)
        return list((await s.scalars(stmt.order_by(ApprovalGrant.tool))).all())


@dataclass(frozen=True)
class GrantLine:
    """A grant with whose it is (the owner's list of everyone's)."""

    grant: ApprovalGrant
    user_id: int
    name: str
    telegram_id: int | None


async def everyones_grants(sf: SessionFactory, limit: int = 500) -> list[GrantLine]:
    async with sf() as s:
        stmt = (
            select(ApprovalGrant, User.name, User.telegram_id)
            .join(User, User.id == ApprovalGrant.user_id)
            .order_by(User.id, ApprovalGrant.tool)
            .limit(limit)
        )
        return [GrantLine(g, g.user_id, n, t) for g, n, t in (await s.execute(stmt)).all()]


async def ask(
    sf: SessionFactory,
    user_id: int,
    owner: int | None,
    tool: str,
    action: str,
    now: datetime,
    *,
    scheduled: bool = False,
) -> int:
    """A new pending question, answerable by `owner` (a Telegram id); its id."""
    async with sf.begin() as s:
        row = ApprovalDecision(user_id=user_id, by_telegram_id=owner, tool=tool, created_at=now,
                               action=action[:ACTION_LIMIT], decision=PENDING,
                               scheduled=scheduled)  # fmt: skip
        s.add(row)
        await s.flush()
        return row.id


async def close_pending(
    sf: SessionFactory, telegram_id: int, asked: Sequence[int], now: datetime
) -> list[int]:
    """Close every question this person may still answer, and those `asked` (in a group
    that was removed); their ids."""
    async with sf.begin() as s:
        pending = ApprovalDecision.decision == PENDING
        theirs = or_(ApprovalDecision.by_telegram_id == telegram_id, ApprovalDecision.id.in_(asked))
        keys = list((await s.scalars(select(ApprovalDecision.id).where(pending, theirs))).all())
        if keys:
            stmt = update(ApprovalDecision).where(ApprovalDecision.id.in_(keys), pending)
            await s.execute(stmt.values(decision=CLOSED, decided_at=now))
        return keys


async def question(sf: SessionFactory, question_id: int) -> ApprovalDecision | None:
    async with sf() as s:
        return await s.get(ApprovalDecision, question_id)


async def settle(sf: SessionFactory, question_id: int, decision: str, now: datetime) -> str:
    """Answer a pending question (once|always|denied|timeout; "always" also grants the tool);
    the decision that stands: this one, or the one that came first."""
    async with sf.begin() as s:
        stmt = update(ApprovalDecision).where(
            ApprovalDecision.id == question_id, ApprovalDecision.decision == PENDING
        )
        nobody = {"by_telegram_id": None} if decision == "timeout" else {}
        done = await s.execute(stmt.values(decision=decision, decided_at=now, **nobody))
        won = bool(done.rowcount)  # type: ignore[attr-defined]
        row = await s.get(ApprovalDecision, question_id, populate_existing=True)
        if row is None:
            return "missing"
        if won and decision == "always":
            grant = await _grant(s, row.user_id, row.tool)
            if grant is None:
                s.add(ApprovalGrant(user_id=row.user_id, tool=row.tool, created_at=now,
                                    scheduled=row.scheduled))  # fmt: skip
            elif row.scheduled:  # a chat's grant now covers scheduled runs too
                grant.scheduled = True
        return row.decision


async def revoke(
    sf: SessionFactory, user_id: int, by: int | None, key: int | str, now: datetime
) -> str | None:
    """Remove one of the user's grants, by its id or its tool; the tool it was for, or None
    when the user has no such grant (another user's id included)."""
    async with sf.begin() as s:
        row = (
            await _grant(s, user_id, key)
            if isinstance(key, str)
            else await s.get(ApprovalGrant, key)
        )
        if row is None or row.user_id != user_id:
            return None
        await s.delete(row)
        s.add(ApprovalDecision(user_id=user_id, by_telegram_id=by, tool=row.tool, action="",
                               decision="revoked", created_at=now, decided_at=now))  # fmt: skip
        return row.tool


async def log(sf: SessionFactory, user_id: int, limit: int = 20) -> list[ApprovalDecision]:
    async with sf() as s:
        stmt = select(ApprovalDecision).where(ApprovalDecision.user_id == user_id)
        return list((await s.scalars(stmt.order_by(ApprovalDecision.id.desc()).limit(limit))).all())
