"""Whether the memory index was built by the configured embedder (checked at startup, by
`sidekick doctor`, and before the first recall), and the full-text language in force."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from db.engine import SessionFactory
from tools.memory import repo
from tools.memory.embeddings import Embedder

log = logging.getLogger(__name__)

REINDEX_HINT = "run `sidekick memory reindex`"


@dataclass(frozen=True)
class IndexStatus:
    ok: bool
    backend: str
    dim: int | None
    stored: str | None
    detail: str


async def index_status(sf: SessionFactory, embedder: Embedder, fts_language: str) -> IndexStatus:
    """The index's state; a new (empty) index is stamped with the embedder's name."""
    async with sf() as s, s.begin():
        if await repo.set_fts_language(s, fts_language):
            log.info("memory full-text index rebuilt for %r", fts_language)
        stored = (await repo.meta(s)).get("model")
        if stored is None:
            if await repo.count_vectors(s) == 0:
                await repo.set_meta(s, {"model": embedder.name})
                return IndexStatus(True, embedder.name, await repo.vec_dim(s), None, "new index")
            stored = "unknown"
        dim = await repo.vec_dim(s)
    ok = stored == embedder.name
    detail = (
        "up to date" if ok else f"built with {stored}, configured {embedder.name}: {REINDEX_HINT}"
    )
    return IndexStatus(ok, embedder.name, dim, stored, detail)
