"""Pseudo-relevance feedback: a second recall round built from the first round's best hits.

Two kinds, both off by default (RankWeights.feedback, .feedback_vec) and measured as
ablation rows by bench/memory_recall.py: words (RM3-like: the query's words plus the rare
words the best hits share, for a multi-hop question that names one thing while the hits
name the others) and vectors (Rocchio: the query moved toward the best hits' centroid).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import datetime
from typing import Any

import numpy as np

from db.repos import memory as repo
from tools.memory.rank import RankWeights, fuse
from tools.memory.wordcounts import WordCounts

Hits = list[tuple[int, float]]


def _top(scores: dict[int, float], n: int) -> list[int]:
    return sorted(scores, key=lambda m: -scores[m])[:n]


def _add(scores: dict[int, float], again: dict[int, float], weight: float) -> dict[int, float]:
    return {m: scores.get(m, 0.0) + weight * again.get(m, 0.0) for m in scores | again}


async def by_words(
    s: Any,
    user_id: int,
    now: datetime,
    counts: WordCounts,
    terms: list[str],
    scores: dict[int, float],
    w: RankWeights,
    bm25: Callable[[list[str]], Awaitable[Hits]],
) -> dict[int, float]:
    """A second BM25 round with the query's words plus the rare words its best hits share."""
    found = await repo.rows(s, user_id, _top(scores, w.feedback_docs), now)
    extra = await counts.shared(s, [r.memory.content for r in found], terms, w.feedback_terms)
    if not extra:
        return scores
    return _add(scores, fuse(await bm25(terms + extra), [], w), w.feedback)


async def by_vectors(
    s: Any,
    vec: np.ndarray,
    scores: dict[int, float],
    w: RankWeights,
    knn: Callable[[np.ndarray], Awaitable[Hits]],
) -> dict[int, float]:
    """A second KNN round from the query plus the centroid of the best hits' vectors."""
    blobs = await repo.vectors_of(s, _top(scores, w.feedback_docs))
    if not blobs:
        return scores
    docs = np.stack([np.frombuffer(b, dtype=np.float32) for b in blobs.values()])
    docs = docs / np.maximum(np.linalg.norm(docs, axis=1, keepdims=True), 1e-9)
    moved = vec / max(float(np.linalg.norm(vec)), 1e-9) + docs.mean(axis=0)
    moved = moved / max(float(np.linalg.norm(moved)), 1e-9)
    again = fuse([], await knn(moved.astype(np.float32)), replace(w, vector=1.0))
    return _add(scores, again, w.feedback_vec)
