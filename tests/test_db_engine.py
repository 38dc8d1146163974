"""The engine: real transactions, sqlite-vec loaded, pragmas on every connection."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import func, select, text

from db.engine import create_engine, session_factory
from db.migrate import pending, upgrade
from db.models import ChatSession, User
from db.models.base import utcnow


async def test_a_failed_transaction_leaves_nothing_behind(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 't.db'}")
    try:
        await upgrade(engine)
        sf = session_factory(engine)
        with pytest.raises(RuntimeError):
            async with sf() as s, s.begin():
                user = User(telegram_id=1, name="a", created_at=utcnow())
                s.add(user)
                await s.flush()
                s.add(ChatSession(user_id=user.id, name="x", started_at=utcnow()))
                await s.flush()
                raise RuntimeError("crash mid-transaction")
        async with sf() as s:
            assert (await s.execute(select(func.count()).select_from(User))).scalar_one() == 0
            users = (await s.execute(select(func.count()).select_from(ChatSession))).scalar_one()
            assert users == 0
    finally:
        await engine.dispose()


async def test_connections_have_vec_wal_and_foreign_keys(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'sub' / 't.db'}")
    try:
        assert await pending(engine)  # a new file: every migration pending
        await upgrade(engine)
        assert await pending(engine) == []
        async with engine.connect() as conn:
            vec = (await conn.execute(text("select vec_version()"))).scalar_one()
            mode = (await conn.execute(text("pragma journal_mode"))).scalar_one()
            fks = (await conn.execute(text("pragma foreign_keys"))).scalar_one()
        assert vec.startswith("v") and mode == "wal" and fks == 1
    finally:
        await engine.dispose()
