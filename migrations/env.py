"""Alembic environment: runs on a connection handed in by db.migrate, or on DATABASE_URL."""

from __future__ import annotations

import asyncio
import os
from collections.abc import MutableMapping
from typing import Any

from alembic import context
from sqlalchemy.engine import Connection

from bot.features import metadata

config = context.config
target_metadata = metadata()


def _ours(name: str | None, type_: str, parent_names: MutableMapping[Any, str | None]) -> bool:
    """What autogenerate compares: the tables the models declare. The memory index's
    FTS5 and vec0 tables (and their shadow tables) are made by raw SQL in their
    migrations, so a revision must never propose to drop them."""
    return type_ != "table" or name in target_metadata.tables


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        include_name=_ours,
        render_as_batch=True,  # SQLite cannot ALTER most things; batch mode copies tables
    )
    with context.begin_transaction():
        context.run_migrations()


async def _run_standalone() -> None:
    from db.engine import create_engine

    url = os.environ.get("DATABASE_URL") or config.get_main_option("sqlalchemy.url")
    if not url:
        raise SystemExit("set DATABASE_URL to run alembic directly, or use `sidekick migrate`")
    engine = create_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.run_sync(_run)
    finally:
        await engine.dispose()


connection = config.attributes.get("connection")
if connection is not None:
    _run(connection)
else:
    asyncio.run(_run_standalone())
