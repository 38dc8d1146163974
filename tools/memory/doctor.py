"""`sidekick doctor` lines for memory: embedding backend, dimension, reindex needed or not."""

from __future__ import annotations

from tools.base import CheckResult
from tools.memory.store import MemoryStore


async def check_memory(store: MemoryStore) -> list[CheckResult]:
    try:
        vec = await store.embedder.embed(["doctor probe"])
    except Exception as exc:
        return [
            CheckResult(
                "embeddings",
                False,
                f"{store.embedder.name}: {exc}",
                "check EMBEDDINGS / EMBEDDINGS_BASE_URL / EMBEDDINGS_API_KEY, or set "
                "EMBEDDINGS=wordllama (offline)",
            )
        ]
    status = await store.index_status()
    dim = int(vec.shape[1])
    same_dim = status.dim in (None, dim)
    return [
        CheckResult("embeddings", True, f"{store.embedder.name}, {dim} dimensions"),
        CheckResult(
            "memory index",
            status.ok and same_dim,
            status.detail if same_dim else f"index has {status.dim} dimensions, model {dim}",
            "run `sidekick memory reindex`",
        ),
    ]
