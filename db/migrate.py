"""Apply Alembic migrations to an engine's database (at startup and `sidekick migrate`)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

if TYPE_CHECKING:
    from alembic.config import Config


def _versions_dir() -> Path:
    import migrations

    return Path(migrations.__file__).parent / "versions"


def alembic_config() -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(_versions_dir().parent))
    return cfg


def script_heads(versions: Path | None = None) -> set[str] | None:
    """Head revisions read from the migration files' `revision`/`down_revision` literals,
    without importing Alembic (a noticeable share of every start-up). None when a file does not
    spell them as plain literals: then Alembic decides."""
    revisions: set[str] = set()
    parents: set[str] = set()
    for path in sorted((versions or _versions_dir()).glob("*.py")):
        found: dict[str, object] = {}
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.AnnAssign | ast.Assign) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    if isinstance(t, ast.Name) and t.id in ("revision", "down_revision"):
                        try:
                            found[t.id] = ast.literal_eval(node.value)
                        except ValueError:
                            return None
        rev, down = found.get("revision"), found.get("down_revision")
        if not isinstance(rev, str):
            return None
        revisions.add(rev)
        if isinstance(down, str):
            parents.add(down)
        elif isinstance(down, tuple | list):
            parents.update(str(d) for d in down)
    return (revisions - parents) or None


async def _current(engine: AsyncEngine) -> set[str] | None:
    async with engine.connect() as conn:
        exists = await conn.scalar(
            text("SELECT 1 FROM sqlite_master WHERE type='table' AND name='alembic_version'")
        )
        if not exists:
            return None
        rows = await conn.execute(text("SELECT version_num FROM alembic_version"))
        return {r[0] for r in rows}


async def upgrade(engine: AsyncEngine) -> None:
    # The usual start: the database is already at head, and Alembic need not load at all.
    heads = script_heads()
    if heads is not None and engine.dialect.name == "sqlite" and await _current(engine) == heads:
        return
    from alembic import command

    cfg = alembic_config()

    def run(conn: Connection) -> None:
        if conn.dialect.name == "postgresql":
            # Workers starting together: one migrates, the others wait and find it done.
            conn.execute(text("SELECT pg_advisory_xact_lock(5163736)"))
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "head")

    async with engine.begin() as conn:
        await conn.run_sync(run)


async def pending(engine: AsyncEngine) -> list[str]:
    """Revisions not yet applied (empty when the database is up to date)."""
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(alembic_config())

    def check(conn: Connection) -> list[str]:
        current = set(MigrationContext.configure(conn).get_current_heads())
        applied: set[str] = set()
        for head in current:
            applied.update(r.revision for r in script.iterate_revisions(head, "base"))
        return [r.revision for r in script.walk_revisions() if r.revision not in applied]

    async with engine.connect() as conn:
        return await conn.run_sync(check)
