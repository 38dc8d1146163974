"""What the memory benchmark's parts share: the clock and a fresh database."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import os  # noqa: E402
from datetime import UTC, datetime  # noqa: E402
from typing import Any  # noqa: E402

from bot.config import load_settings  # noqa: E402
from db.engine import SessionFactory, create_engine, session_factory  # noqa: E402
from db.migrate import upgrade  # noqa: E402

T0 = datetime(2026, 1, 1, tzinfo=UTC)


class Clock:
    """The bench's clock: set to each LoCoMo session's date while its turns are stored."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def clock() -> datetime:
    return T0


async def open_db(folder: Path, backend: str = "sqlite") -> tuple[Any, SessionFactory, Any]:
    """A fresh database: a SQLite file in `folder`, or (backend postgres) a new database on
    the server DATABASE_URL names (scripts/with-pg.sh starts a throwaway one)."""
    extra: dict[str, Any] = {}
    if backend == "postgres":
        import asyncpg
        from sqlalchemy.engine import make_url

        server = make_url(os.environ["DATABASE_URL"])
        name = f"bench_{os.getpid()}_{folder.name.lower().replace('-', '_')}"
        conn = await asyncpg.connect(
            host=server.host, port=server.port, user=server.username,
            password=server.password, database=server.database or "postgres",
        )  # fmt: skip
        await conn.execute(f"CREATE DATABASE {name}")
        await conn.close()
        extra["database_url"] = server.set(database=name).render_as_string(hide_password=False)
    settings = load_settings(data_dir=folder, llm_model="bench", **extra)
    engine = create_engine(settings.db_url)
    await upgrade(engine)
    return engine, session_factory(engine), settings
