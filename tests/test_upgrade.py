"""Upgrading (`git pull && make run`): a database made by the previous release's migrations
is brought to head at start and keeps its rows."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from alembic import command
from alembic.script import ScriptDirectory
from sqlalchemy import text
from sqlalchemy.engine import Connection

from db.engine import create_engine
from db.migrate import alembic_config
from tests.test_config import sidekick


async def test_previous_release_database_upgrades_and_keeps_its_rows(tmp_path: Path) -> None:
    cfg = alembic_config()
    script = ScriptDirectory.from_config(cfg)
    head = script.get_current_head()
    assert head is not None
    previous = script.get_revision(head).down_revision
    assert isinstance(previous, str)  # one parent: the release before this one
    db = tmp_path / "data" / "sidekick.db"
    db.parent.mkdir()
    engine = create_engine(f"sqlite+aiosqlite:///{db}")

    def old_release(conn: Connection) -> None:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, previous)
        conn.execute(
            text(
                "INSERT INTO users (id, telegram_id, name, created_at) "
                "VALUES (1, 42, 'Ann', '2026-01-01 10:00:00')"
            )
        )
        conn.execute(
            text(
                "INSERT INTO sessions (id, user_id, name, started_at) "
                "VALUES (1, 1, 'first', '2026-01-01 10:00:00')"
            )
        )
        for i in range(1, 4):
            conn.execute(
                text(
                    "INSERT INTO messages (session_id, user_id, role, content, request_id, "
                    "created_at) VALUES (1, 1, 'user', :c, :r, '2026-01-01 10:00:00')"
                ),
                {"c": f"message {i}", "r": f"req-{i}"},
            )

    try:
        async with engine.begin() as conn:
            await conn.run_sync(old_release)
    finally:
        await engine.dispose()

    (tmp_path / ".env").write_text("LLM_MODEL=m\n")
    proc = sidekick(tmp_path, "bot.cli", "migrate")  # what `make run` does at start
    assert proc.returncode == 0, proc.stderr
    assert "applied 1 migration(s)" in proc.stdout
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [(head,)]
        assert conn.execute("SELECT name FROM users").fetchall() == [("Ann",)]
        contents = [r[0] for r in conn.execute("SELECT content FROM messages ORDER BY id")]
        assert contents == ["message 1", "message 2", "message 3"]
    finally:
        conn.close()
