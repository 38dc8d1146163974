"""Locks shared by every worker process on one PostgreSQL database (advisory locks).

On SQLite there is one process (SQLite is the single-worker backend): the locks are no-ops
and in-process ordering (bot/telegram/middlewares.ChatOrderMiddleware) is all there is.
A lock holds its own connection from a separate pool for as long as it is held, so busy
chats never starve the pool the handlers themselves use."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from db.engine import is_postgres, postgres_url


def lock_key(namespace: str, value: int | str) -> int:
    """A signed 64-bit advisory lock key for (namespace, value)."""
    digest = hashlib.blake2b(f"{namespace}:{value}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class Locks:
    def __init__(self, engine: AsyncEngine | None) -> None:
        self._engine = engine

    @classmethod
    def for_database(cls, engine: AsyncEngine) -> Locks:
        if not is_postgres(engine):
            return cls(None)
        url = postgres_url(engine.url.render_as_string(hide_password=False))
        return cls(create_async_engine(url, pool_size=5, max_overflow=200, pool_pre_ping=True))

    @property
    def shared(self) -> bool:
        """Whether the locks span processes (PostgreSQL)."""
        return self._engine is not None

    @asynccontextmanager
    async def hold(self, namespace: str, value: int | str) -> AsyncIterator[None]:
        """Wait for the lock, hold it inside the block. A worker that dies releases it (the
        server ends its session), so a killed worker never blocks a chat for good."""
        if self._engine is None:
            yield
            return
        key = lock_key(namespace, value)
        async with self._engine.connect() as conn:
            await conn.execute(text("SELECT pg_advisory_lock(:k)"), {"k": key})
            await conn.commit()
            try:
                yield
            finally:
                await conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": key})
                await conn.commit()

    @asynccontextmanager
    async def try_hold(self, namespace: str, value: int | str) -> AsyncIterator[bool]:
        """Take the lock if free (True inside the block), else False at once."""
        if self._engine is None:
            yield True
            return
        key = lock_key(namespace, value)
        async with self._engine.connect() as conn:
            got = bool(
                (await conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": key})).scalar()
            )
            await conn.commit()
            try:
                yield got
            finally:
                if got:
                    await conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": key})
                    await conn.commit()

    async def close(self) -> None:
        if self._engine is not None:
            await self._engine.dispose()
