"""`sidekick migrate --from URL --to URL`: copy a whole install into another database
(typically SQLite to PostgreSQL), then check every table's row count.

Plain tables are copied row by row through their SQLAlchemy Table objects (so a new store's
tables come along with nothing to add here); the memory indexes, which are not plain tables
(sqlite-vec/FTS5 on SQLite, pgvector/tsvector on PostgreSQL), are rebuilt in the target from
the source's stored vectors and the memories' text."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import Integer, Table, delete, func, select, text
from sqlalchemy.ext.asyncio import AsyncEngine

from db.engine import create_engine, is_postgres, session_factory
from db.migrate import upgrade
from db.models import Base, Memory
from db.repos import memory as memory_repo

BATCH = 1000


class CopyError(Exception):
    """The copy cannot start or its counts do not match (the message says which)."""


@dataclass(frozen=True)
class TableCount:
    table: str
    source: int
    target: int


async def _count(engine: AsyncEngine, table: Table | str) -> int:
    async with engine.connect() as conn:
        if isinstance(table, str):
            return int((await conn.execute(text(f"SELECT count(*) FROM {table}"))).scalar_one())
        return int((await conn.execute(select(func.count()).select_from(table))).scalar_one())


async def _copy_table(src: AsyncEngine, dst: AsyncEngine, table: Table) -> None:
    async with src.connect() as sconn, dst.begin() as dconn:
        if table.name == "memory_meta":  # the target's own defaults give way to the source's
            await dconn.execute(delete(table))
        result = await sconn.stream(select(table))
        async for rows in result.partitions(BATCH):
            await dconn.execute(table.insert(), [dict(r._mapping) for r in rows])


async def _reset_sequences(dst: AsyncEngine, tables: list[Table]) -> None:
    """PostgreSQL: rows came with their ids, so move each id sequence past the largest."""
    if not is_postgres(dst):
        return
    async with dst.begin() as conn:
        for table in tables:
            pk = list(table.primary_key.columns)
            if len(pk) != 1 or not isinstance(pk[0].type, Integer):
                continue
            seq = (
                await conn.execute(
                    text("SELECT pg_get_serial_sequence(:t, :c)"),
                    {"t": table.name, "c": pk[0].name},
                )
            ).scalar()
            if seq:
                await conn.execute(
                    text(
                        f"SELECT setval('{seq}', coalesce((SELECT max({pk[0].name}) "
                        f"FROM {table.name}), 0) + 1, false)"
                    )
                )


async def _copy_memory_index(src: AsyncEngine, dst: AsyncEngine) -> None:
    ssf, dsf = session_factory(src), session_factory(dst)
    async with ssf() as s:
        dim = await memory_repo.vec_dim(s)
    if dim is not None:
        async with dsf() as d, d.begin():
            if await memory_repo.vec_dim(d) != dim:
                await memory_repo.recreate_vec(d, dim)
    after = 0
    while True:
        async with ssf() as s:
            batch = await memory_repo.batch_after(s, after, BATCH)
            vectors = await memory_repo.vectors_of(s, [m.id for m in batch])
        if not batch:
            return
        async with dsf() as d, d.begin():
            for m in batch:
                row = await d.get(Memory, m.id)
                assert row is not None
                await memory_repo.replace(d, row, vectors.get(m.id))
        after = batch[-1].id


async def copy_database(
    source_url: str, target_url: str, say: Callable[[str], None] = print
) -> list[TableCount]:
    """Copy everything from source to an empty, migrated target; returns the counts, raises
    CopyError when the target is not empty or a count differs."""
    src, dst = create_engine(source_url), create_engine(target_url)
    try:
        await upgrade(src)
        await upgrade(dst)
        tables = list(Base.metadata.sorted_tables)
        for table in tables:
            if table.name != "memory_meta" and await _count(dst, table):
                raise CopyError(f"the target is not empty (table {table.name} has rows)")
        for table in tables:
            await _copy_table(src, dst, table)
            say(f"copied {table.name}")
        await _reset_sequences(dst, tables)
        await _copy_memory_index(src, dst)
        counts = [
            TableCount(t.name, await _count(src, t), await _count(dst, t)) for t in tables
        ] + [
            TableCount(t, await _count(src, t), await _count(dst, t))
            for t in ("memory_vec", "memory_fts")
        ]
        wrong = [c for c in counts if c.source != c.target]
        if wrong:
            raise CopyError(
                "counts differ: " + ", ".join(f"{c.table} {c.source}≠{c.target}" for c in wrong)
            )
        return counts
    finally:
        await src.dispose()
        await dst.dispose()
