"""The access table's SQL: who is let in, strangers' requests and their limits."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError

from bot.access.models import AccessEntry
from db.engine import SessionFactory

# A stranger has one request open at a time, and asks at most this many an hour (for
# themselves and for groups): one stranger cannot crowd out the others.
REQUESTS_PER_HOUR = 3
# At most this many requests wait for the owner at once: a crowd of strangers cannot flood
# the owner, and what is turned away meanwhile is counted and said (bot/access/pairing.py).
MAX_WAITING = 10
# A request the owner left unanswered may be asked again after a day; a denied (or removed)
# one after a week.
ASK_AGAIN_AFTER = timedelta(days=1)
DENIED_FOR = timedelta(days=7)
LET_IN = ("allowed", "owner")


@dataclass(frozen=True)
class Admitted:
    """Who the table lets in: users and groups by Telegram id, and the learned owner."""

    users: frozenset[int]
    groups: frozenset[int]
    owner: int | None


async def admitted(sf: SessionFactory) -> Admitted:
    async with sf() as s:
        rows = (
            await s.execute(
                select(AccessEntry.chat_id, AccessEntry.kind, AccessEntry.state).where(
                    AccessEntry.state.in_(LET_IN)
                )
            )
        ).all()
    users = frozenset(r.chat_id for r in rows if r.kind == "user")
    groups = frozenset(r.chat_id for r in rows if r.kind == "group")
    owner = next((r.chat_id for r in rows if r.state == "owner"), None)
    return Admitted(users, groups, owner)


async def request(
    sf: SessionFactory, chat_id: int, kind: str, name: str, asked_by: int, now: datetime
) -> str:
    """Record a stranger's (or a group's) request. The outcome: "asked" (a new request: tell
    the owner), "pending" (one is open already), "denied" (refused lately), "busy" (this
    stranger's requests this hour are used up), "full" (MAX_WAITING requests wait for the
    owner already: this one is turned away) or "allowed" (let in meanwhile)."""
    async with sf.begin() as s:
        row = (await s.scalars(select(AccessEntry).where(AccessEntry.chat_id == chat_id))).first()
        if row is not None:
            if row.state in LET_IN:
                return "allowed"
            since = now - (row.decided_at or row.asked_at)
            if row.state == "pending" and since < ASK_AGAIN_AFTER:
                return "pending"
            if row.state in ("denied", "removed") and since < DENIED_FOR:
                return "denied"
        mine = await s.scalar(
            select(func.count()).where(
                AccessEntry.asked_at > now - timedelta(hours=1),
                AccessEntry.asked_by == asked_by,
                AccessEntry.state == "pending",
            )
        )
        if (mine or 0) >= REQUESTS_PER_HOUR:
            return "busy"
        waiting = await s.scalar(
            select(func.count()).where(
                AccessEntry.asked_at > now - ASK_AGAIN_AFTER, AccessEntry.state == "pending"
            )
        )
        if (waiting or 0) >= MAX_WAITING:
            return "full"
        if row is None:
            s.add(AccessEntry(chat_id=chat_id, kind=kind, name=name[:200], asked_by=asked_by,
                              state="pending", asked_at=now))  # fmt: skip
        else:
            row.state, row.name, row.asked_by, row.asked_at = "pending", name[:200], asked_by, now
            row.decided_at = row.decided_by = None
    return "asked"


# What each decision may follow: Deny answers a request, Remove takes back a yes.
FROM = {
    "allowed": ("pending", "denied", "removed"),
    "denied": ("pending",),
    "removed": ("allowed",),
}


async def decide(
    sf: SessionFactory, chat_id: int, state: str, by: int | None, now: datetime
) -> tuple[AccessEntry | None, bool]:
    """Allow, deny or remove: the row as it was (None: no such entry), and whether this
    decision changed it (False: it was decided otherwise already)."""
    async with sf.begin() as s:
        row = (await s.scalars(select(AccessEntry).where(AccessEntry.chat_id == chat_id))).first()
        if row is None:
            return None, False
        before = AccessEntry(chat_id=row.chat_id, kind=row.kind, name=row.name,
                             asked_by=row.asked_by, state=row.state, asked_at=row.asked_at,
                             decided_at=row.decided_at)  # fmt: skip
        if row.state not in FROM[state]:
            return before, False
        row.state, row.decided_at, row.decided_by = state, now, by
        return before, True


async def entries(sf: SessionFactory) -> list[AccessEntry]:
    """Everyone let in or waiting, groups after people, each in the order they asked."""
    async with sf() as s:
        stmt = select(AccessEntry).where(AccessEntry.state.in_((*LET_IN, "pending")))
        rows = (await s.scalars(stmt.order_by(AccessEntry.kind.desc(), AccessEntry.id))).all()
        return list(rows)


async def learn_owner(sf: SessionFactory, telegram_id: int, name: str, now: datetime) -> bool:
    """Make this user the owner, unless one was learned already (by this worker or another):
    True when this call did it."""
    try:
        async with sf.begin() as s:
            if await s.scalar(select(AccessEntry.id).where(AccessEntry.state == "owner")):
                return False
            row = (
                await s.scalars(select(AccessEntry).where(AccessEntry.chat_id == telegram_id))
            ).first()
            if row is None:
                s.add(AccessEntry(chat_id=telegram_id, kind="user", name=name[:200],
                                  state="owner", asked_at=now, decided_at=now))  # fmt: skip
            else:
                row.state, row.decided_at = "owner", now
    except IntegrityError:  # another worker added this user at the same moment
        return False
    return True
