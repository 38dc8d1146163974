"""Start-up skips Alembic when the database is at head, and still migrates when it is not."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.script import ScriptDirectory
from sqlalchemy import text
from sqlalchemy.engine import Connection

from db.engine import create_engine
from db.migrate import alembic_config, pending, script_heads, upgrade


def test_heads_read_from_the_files_match_alembic() -> None:
    script = ScriptDirectory.from_config(alembic_config())
    assert script_heads() == set(script.get_heads())


def test_heads_of_a_merge_and_an_unreadable_file(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text('revision = "a"\ndown_revision = None\n')
    (tmp_path / "b.py").write_text('revision: str = "b"\ndown_revision = "a"\n')
    (tmp_path / "c.py").write_text('revision = "c"\ndown_revision = ("a",)\n')
    assert script_heads(tmp_path) == {"b", "c"}
    (tmp_path / "m.py").write_text('revision = "m"\ndown_revision = ("b", "c")\n')
    assert script_heads(tmp_path) == {"m"}
    (tmp_path / "x.py").write_text('revision = make_id()\ndown_revision = "m"\n')
    assert script_heads(tmp_path) is None  # Alembic decides


async def test_an_older_database_is_still_upgraded(tmp_path: Path) -> None:
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 't.db'}")
    try:
        cfg = alembic_config()

        def to_first(conn: Connection) -> None:
            cfg.attributes["connection"] = conn
            command.upgrade(cfg, "0001")

        async with engine.begin() as conn:
            await conn.run_sync(to_first)
        assert await pending(engine)
        await upgrade(engine)
        assert await pending(engine) == []
        await upgrade(engine)  # at head: nothing to do, nothing breaks
        async with engine.connect() as conn:
            rows = (await conn.execute(text("SELECT version_num FROM alembic_version"))).all()
        assert {r[0] for r in rows} == script_heads()
    finally:
        await engine.dispose()
