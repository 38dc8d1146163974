"""Re-embedding every memory: what `sidekick memory reindex` does after an embedder change."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from db.engine import SessionFactory
from db.repos import memory as repo
from tools.memory.embeddings import Embedder

BATCH = 256


async def reembed_all(
    sf: SessionFactory, embedder: Embedder, progress: Callable[[int, int], None] | None = None
) -> int:
    """Rebuild the vector table at the embedder's dimension and refill it, batch by batch;
    record the embedder's name. Returns how many memories were embedded."""
    async with sf() as s:
        total = await repo.count_all(s)
    done, after, dim = 0, 0, None
    while True:
        async with sf() as s, s.begin():
            batch = await repo.batch_after(s, after, BATCH)
            if not batch:
                break
            vecs = await embedder.embed([m.content for m in batch])
            if dim is None:
                dim = int(vecs.shape[1])
                await repo.recreate_vec(s, dim)
            for m, v in zip(batch, vecs, strict=True):
                await repo.replace(s, m, v.astype(np.float32).tobytes())
            after = batch[-1].id
            done += len(batch)
        if progress:
            progress(done, total)
    async with sf() as s, s.begin():
        if dim is None:
            probe = await embedder.embed(["probe"])
            await repo.recreate_vec(s, int(probe.shape[1]))
        await repo.set_meta(s, {"model": embedder.name})
    return done
