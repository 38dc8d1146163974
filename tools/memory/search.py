"""The search phase of a recall: KNN through sqlite-vec or pgvector, and BM25 over the
rarest query words. A base of MemoryStore, which keeps the state declared here in step with
its writes."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

import numpy as np

from tools.base import Clock
from tools.memory import repo
from tools.memory.text import WordCounts, fts_match

LAYERS = ("long", "mid", "short", "session")


class Search:
    _clock: Clock
    _vectors: bool | None  # None: not checked yet
    _counts: dict[int, int]  # memories per user, counted once, then tracked
    _total: int | None  # memories of all users, likewise
    words: WordCounts

    async def _search(
        self,
        s: Any,
        user_id: int,
        terms: list[str],
        embedding: asyncio.Future[np.ndarray | None] | None,
        pool: int,
        wanted: list[str],
        now: datetime,
    ) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
        """BM25 hits of the terms and KNN hits of the query's vector (being made), `pool`
        of each."""
        vec_hits: list[tuple[int, float]] = []
        if embedding is not None and (vec := await embedding) is not None and self._vectors:
            vec_hits = await self._knn_layers(s, user_id, vec, pool, wanted)
        bm_hits = await self._bm25(s, user_id, terms, pool, wanted) if terms else []
        return bm_hits, vec_hits

    async def _knn(
        self, s: Any, user_id: int, vec: np.ndarray, k: int, layer: str | None
    ) -> list[tuple[int, float]]:
        return await repo.knn(s, user_id, vec.astype(np.float32).tobytes(), k, layer, self._clock())

    async def _knn_layers(
        self, s: Any, user_id: int, vec: np.ndarray, k: int, wanted: list[str]
    ) -> list[tuple[int, float]]:
        """KNN over the wanted layers (one search when they are all wanted), nearest first."""
        hits: list[tuple[int, float]] = []
        for layer in [None] if len(wanted) == len(LAYERS) else wanted:
            hits += await self._knn(s, user_id, vec, k, layer)
        return sorted(hits, key=lambda t: t[1])

    async def _bm25(
        self, s: Any, user_id: int, terms: list[str], k: int, wanted: list[str]
    ) -> list[tuple[int, float]]:
        """BM25 over the rarest query words; unscoped first for a user who owns most of the
        index (exact when it yields k rows, see repo.bm25), else scoped to the owner."""
        now = self._clock()
        kept = await self.words.keep(s, terms)
        match = fts_match(kept)
        if user_id not in self._counts:
            self._counts[user_id] = await repo.count_user(s, user_id)
        if self._total is None:
            self._total = await repo.count_all(s)
        if self._counts[user_id] * 2 >= max(self._total, 1):
            hits = await repo.bm25(s, user_id, match, k, wanted, now, scoped=False)
            if len(hits) >= k:
                return hits
        return await repo.bm25(s, user_id, match, k, wanted, now)
