"""Re-embedding every memory: what `sidekick memory reindex` does after an embedder change."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from db.engine import SessionFactory
from tools.memory import repo
from tools.memory.embeddings import Embedder

if TYPE_CHECKING:
    from tools.memory.store import MemoryStore

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


async def reindex_command(store: MemoryStore | None) -> None:
    """`sidekick memory reindex` on the app's store, its progress on stderr."""
    if store is None:
        print("memory is not configured", file=sys.stderr)
        return

    def progress(done: int, total: int) -> None:
        print(f"\rre-embedded {done}/{total}", end="", file=sys.stderr, flush=True)

    done = await store.reindex(progress)
    print(f"\nmemory index rebuilt with {store.embedder.name}: {done} memories", flush=True)
