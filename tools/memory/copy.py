"""The memory indexes in `sidekick migrate --from/--to` (db/copy.py copies the plain tables):
sqlite-vec/FTS5 on SQLite and pgvector/tsvector on PostgreSQL are no plain tables, so they
are rebuilt in the target from the source's stored vectors and the memories' text."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncEngine

from db.copy import BATCH, Index
from db.engine import session_factory
from tools.memory import repo
from tools.memory.models import Memory


async def rebuild(src: AsyncEngine, dst: AsyncEngine) -> None:
    """The target's vector table at the source's dimension, then every memory re-indexed
    with its stored vector (none re-embedded), batch by batch."""
    ssf, dsf = session_factory(src), session_factory(dst)
    async with ssf() as s:
        dim = await repo.vec_dim(s)
    if dim is not None:
        async with dsf() as d, d.begin():
            if await repo.vec_dim(d) != dim:
                await repo.recreate_vec(d, dim)
    after = 0
    while True:
        async with ssf() as s:
            batch = await repo.batch_after(s, after, BATCH)
            vectors = await repo.vectors_of(s, [m.id for m in batch])
        if not batch:
            return
        async with dsf() as d, d.begin():
            for m in batch:
                row = await d.get(Memory, m.id)
                assert row is not None
                await repo.replace(d, row, vectors.get(m.id))
        after = batch[-1].id


# memory_meta: on PostgreSQL migration 0003 seeds the text search language, which gives way
# to the source's.
INDEX = Index(tables=("memory_vec", "memory_fts"), rebuild=rebuild, seeded=("memory_meta",))
