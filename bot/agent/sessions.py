"""Starting a new chat session: the one path for /newsession, the terminal and the scheduler."""

from __future__ import annotations

from dataclasses import dataclass

from db.engine import SessionFactory
from db.repos import core as repo
from tools.base import Clock


@dataclass
class NewSession:
    session_id: int
    name: str
    ended_session_id: int | None


async def start_new_session(
    session_factory: SessionFactory,
    clock: Clock,
    *,
    telegram_user_id: int | None,
    user_name: str = "",
    name: str | None = None,
) -> NewSession:
    """End the user's open session (if any) and open a new one, named or dated."""
    now = clock()
    async with session_factory() as s, s.begin():
        user = await repo.get_or_create_user(s, telegram_user_id, user_name, now)
        current = await repo.current_session(s, user.id)
        if current is not None:
            await repo.end_session(s, current.id, now)
        created = await repo.create_session(s, user.id, name, now)
        return NewSession(created.id, created.name, current.id if current else None)
