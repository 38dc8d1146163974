"""Migration 0004: sessions that ended before it count as archived; it downgrades cleanly."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from sqlalchemy import text
from sqlalchemy.engine import Connection

from db.engine import create_engine
from db.migrate import alembic_config


async def test_upgrade_marks_old_ended_sessions_archived(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'm.db'}")
    cfg = alembic_config()

    def run(conn: Connection, op: str, target: str) -> None:
        cfg.attributes["connection"] = conn
        getattr(command, op)(cfg, target)

    try:
        async with engine.begin() as conn:
            await conn.run_sync(run, "upgrade", "0003")
            await conn.execute(
                text("INSERT INTO users (id, name, created_at) VALUES (1, 'a', '2026-01-01');")
            )
            await conn.execute(
                text(
                    "INSERT INTO sessions (id, user_id, name, started_at, ended_at) VALUES "
                    "(1, 1, 'old', '2026-01-01', '2026-01-02'), "
                    "(2, 1, 'open', '2026-01-03', NULL)"
                )
            )
        async with engine.begin() as conn:
            await conn.run_sync(run, "upgrade", "head")
            rows = (
                await conn.execute(
                    text("SELECT session_id, archived_at, summary FROM session_archives")
                )
            ).all()
        assert [(r[0], str(r[1])[:10], r[2]) for r in rows] == [(1, "2026-01-02", None)]
        async with engine.begin() as conn:
            # An explicit target: "0004@-1" only undid the newest revision once migrations
            # followed the 0006 merge.
            await conn.run_sync(run, "downgrade", "0003")
            tables = (
                await conn.execute(text("SELECT name FROM sqlite_master WHERE type='table'"))
            ).scalars()
            assert "session_archives" not in set(tables)
    finally:
        await engine.dispose()
