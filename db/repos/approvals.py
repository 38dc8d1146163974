"""The approval grants and the audit of decisions: one transaction per decision."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from db.engine import SessionFactory
from db.models.approvals import ApprovalDecision, ApprovalGrant

ACTION_LIMIT = 2000  # characters of the action kept in the audit


async def _grant(s: AsyncSession, user_id: int, tool: str) -> ApprovalGrant | None:
    stmt = select(ApprovalGrant).where(ApprovalGrant.user_id == user_id, ApprovalGrant.tool == tool)
    return (await s.scalars(stmt)).first()


def _decision(
    user_id: int, by: int | None, tool: str, action: str, decision: str, now: datetime
) -> ApprovalDecision:
    return ApprovalDecision(user_id=user_id, by_telegram_id=by, tool=tool, action=action,
                            decision=decision, created_at=now)  # fmt: skip


async def granted(sf: SessionFactory, user_id: int, tool: str) -> bool:
    async with sf() as s:
        return await _grant(s, user_id, tool) is not None


async def grants(sf: SessionFactory, user_id: int) -> list[ApprovalGrant]:
    async with sf() as s:
        stmt = select(ApprovalGrant).where(ApprovalGrant.user_id == user_id)
        return list((await s.scalars(stmt.order_by(ApprovalGrant.tool))).all())


async def decide(
    sf: SessionFactory,
    user_id: int,
    by: int | None,
    tool: str,
    action: str,
    decision: str,
    now: datetime,
) -> None:
    """Record a decision; "always" also stores the grant (unless it is there already)."""
    async with sf.begin() as s:
        if decision == "always" and await _grant(s, user_id, tool) is None:
            s.add(ApprovalGrant(user_id=user_id, tool=tool, created_at=now))
        s.add(_decision(user_id, by, tool, action[:ACTION_LIMIT], decision, now))


async def revoke(
    sf: SessionFactory, user_id: int, by: int | None, key: int | str, now: datetime
) -> str | None:
    """Remove one of the user's grants, by its id or its tool; the tool it was for, or None
    when the user has no such grant (another user's id included)."""
    async with sf.begin() as s:
        if isinstance(key, str):
            row = await _grant(s, user_id, key)
        else:
            row = await s.get(ApprovalGrant, key)
        if row is None or row.user_id != user_id:
            return None
        await s.delete(row)
        s.add(_decision(user_id, by, row.tool, "", "revoked", now))
        return row.tool


async def log(sf: SessionFactory, user_id: int, limit: int = 20) -> list[ApprovalDecision]:
    async with sf() as s:
        stmt = select(ApprovalDecision).where(ApprovalDecision.user_id == user_id)
        return list((await s.scalars(stmt.order_by(ApprovalDecision.id.desc()).limit(limit))).all())
