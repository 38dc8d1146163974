"""Apply Alembic migrations to an engine's database (at startup and `sidekick migrate`)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import text
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine


def alembic_config() -> Config:
    import migrations

    cfg = Config()
    cfg.set_main_option("script_location", str(Path(migrations.__file__).parent))
    return cfg


async def upgrade(engine: AsyncEngine) -> None:
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
    script = ScriptDirectory.from_config(alembic_config())

    def check(conn: Connection) -> list[str]:
        current = set(MigrationContext.configure(conn).get_current_heads())
        applied: set[str] = set()
        for head in current:
            applied.update(r.revision for r in script.iterate_revisions(head, "base"))
        return [r.revision for r in script.walk_revisions() if r.revision not in applied]

    async with engine.connect() as conn:
        return await conn.run_sync(check)
