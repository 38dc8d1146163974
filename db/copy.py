"""`sidekick migrate --from URL --to URL`: copy a whole install into another database
(typically SQLite to PostgreSQL), then check every table's row count.

Plain tables are copied row by row through their SQLAlchemy Table objects (so a new store's
tables come along with nothing to add here); what is not a plain table (the memory feature's
sqlite-vec/FTS5 or pgvector/tsvector indexes) is an `Index` its feature hands in, rebuilt in
the target after the tables (tools/memory/copy.py)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from sqlalchemy import Integer, MetaData, Table, delete, func, select, text, tuple_
from sqlalchemy.ext.asyncio import AsyncEngine

from db.engine import create_engine, is_postgres
from db.migrate import upgrade

BATCH = 1000


class CopyError(Exception):
    """The copy cannot start or its counts do not match (the message says which)."""


@dataclass(frozen=True)
class Index:
    """Data outside the plain tables, e.g. a feature's virtual tables: `rebuild(source,
    target)` fills it in the target once the plain tables are there; its `tables` are then
    counted on both sides. `seeded` are plain tables a migration fills with defaults, which
    give way to the source's rows."""

    tables: tuple[str, ...]
    rebuild: Callable[[AsyncEngine, AsyncEngine], Awaitable[None]]
    seeded: tuple[str, ...] = ()


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


async def _copy_table(src: AsyncEngine, dst: AsyncEngine, table: Table, seeded: bool) -> None:
    """In pages of BATCH rows, by primary key: a read holds its rows in memory (SQLite's does
    in full, db/engine.py), so a big table is not read in one."""
    key = list(table.primary_key.columns)
    page = select(table).order_by(*key).limit(BATCH)
    async with src.connect() as sconn, dst.begin() as dconn:
        if seeded:  # the target's own defaults give way to the source's
            await dconn.execute(delete(table))
        rows = (await sconn.execute(page)).all()
        while rows:
            await dconn.execute(table.insert(), [dict(r._mapping) for r in rows])
            if len(rows) < BATCH:
                break
            last = tuple_(*(rows[-1]._mapping[c] for c in key))
            rows = (await sconn.execute(page.where(tuple_(*key) > last))).all()


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


async def copy_database(
    source_url: str,
    target_url: str,
    tables: MetaData,
    indexes: Sequence[Index] = (),
    say: Callable[[str], None] = print,
) -> list[TableCount]:
    """Copy everything from source to an empty, migrated target: the plain tables of
    `tables` (every listed feature's: bot/features.py's metadata()), then `indexes`; returns
    the counts, raises CopyError when the target is not empty or a count differs."""
    src, dst = create_engine(source_url), create_engine(target_url)
    try:
        await upgrade(src)
        await upgrade(dst)
        plain = list(tables.sorted_tables)
        seeded = {name for index in indexes for name in index.seeded}
        for table in plain:
            if table.name not in seeded and await _count(dst, table):
                raise CopyError(f"the target is not empty (table {table.name} has rows)")
        for table in plain:
            await _copy_table(src, dst, table, table.name in seeded)
            say(f"copied {table.name}")
        await _reset_sequences(dst, plain)
        for index in indexes:
            await index.rebuild(src, dst)
        counts = [TableCount(t.name, await _count(src, t), await _count(dst, t)) for t in plain] + [
            TableCount(t, await _count(src, t), await _count(dst, t))
            for index in indexes
            for t in index.tables
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
