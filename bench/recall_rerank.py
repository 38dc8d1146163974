"""Second stages over the fused top-50 of a recall, for bench/recall_quality.py (--rerank):
each gives the 50 hits a new order, from one parameter the leave-one-out grid chooses
(0 keeps the shipped order, so the grid can always decline the stage).

- words: the shipped word-match stage (tools/memory/rank.py), its weight put in the
  leave-one-out grid of recall_quality.py rather than applied here.
- endpoint: the cosine of a second embedder between the query and the memory, added with
  weight `param`: any /v1/embeddings server at EMBEDDINGS_BASE_URL (model: EMBEDDINGS), e.g.
  llama-server serving all-MiniLM-L6-v2 (README, "Memory"), a contextual bi-encoder.
- mmr: maximal marginal relevance over the memories' vectors: relevance minus `param` times
  the best cosine to a memory already taken (multi-hop answers sit in different turns).

No cross-encoder is among them: none ships inside a package this project can install.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Protocol

import httpx
import numpy as np

from tools.memory.embeddings import Embedder, OpenAIEmbedder
from tools.memory.store import MemoryHit


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


class Cosine:
    """endpoint: a second embedder's cosine (e.g. MiniLM served by llama-server)."""

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
            near = np.zeros(len(hits))  # best cosine to a memory already taken
            free = np.ones(len(hits), dtype=bool)
            taken = []
            for _ in range(len(hits)):
                i = int(np.argmax(np.where(free, rel - p * near, -np.inf)))
                taken.append(hits[i].id)
                free[i] = False
                near = np.maximum(near, sim[i])
            out.append(taken)
        return out


def endpoint_embedder() -> Embedder:
    """The /v1/embeddings server named by EMBEDDINGS_BASE_URL, asked for the model EMBEDDINGS
    names (all-MiniLM-L6-v2 when it names none)."""
    url = os.environ.get("EMBEDDINGS_BASE_URL")
    if not url:
        raise SystemExit("set EMBEDDINGS_BASE_URL (and EMBEDDINGS=<model>) to an embeddings server")
    model = os.environ.get("EMBEDDINGS", "").strip()
    if model.lower() in ("", "wordllama", "openai", "minilm"):
        model = "all-minilm-l6-v2"
    http = httpx.AsyncClient(timeout=120)
    return OpenAIEmbedder(http, url, model, os.environ.get("EMBEDDINGS_API_KEY", ""))


def make_stage(name: str, emb: Embedder) -> Stage | None:
    if name in ("none", "words"):  # words: the shipped stage, its weight in the grid
        return None
    if name == "mmr":
        return MMR(emb)
    if name == "endpoint":
        return Cosine(endpoint_embedder())
    raise ValueError(f"unknown rerank stage {name!r}")
