"""The word-match stage: a second look at the best fused candidates of a recall, by late
interaction with the static word embedding. Each content word of the query takes its best
cosine to a word of the memory; the mean of those is the memory's match, added to its
relevance (the best candidate's score = 1) with weight RankWeights.word_match. The match is
added as it is, not rescaled over the candidates: among a handful of them, rescaling would
turn a small difference into the whole range and override the date and question parts.

A multi-hop or inference question rarely repeats its evidence's words ("instruments" /
"plays the violin", "kids" / "my son"): BM25 misses them and the one averaged vector of a
sentence blurs them, while word-to-word similarity in the same embedding finds them.
Measured as the "no-words" row and `--rerank words` of bench/memory_recall.py.

Word vectors are made by a static embedder (WordLlama: a word's vector is a lookup and an
average, a few hundred words a millisecond) and kept per process, bounded.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import numpy as np

from tools.memory.text import words

Embed = Callable[[list[str]], Awaitable[np.ndarray]]


def content_words(text: str) -> list[str]:
    """The distinct words of a text that carry meaning (no stopwords, numbers or short
    words), in order."""
    return list(dict.fromkeys(w for w in words(text) if len(w) > 2 and w.isalpha()))


class WordVectors:
    """Unit vectors of single words, made on first sight and kept (at most `limit`; when
    full, the oldest half of those not wanted now is dropped)."""

    def __init__(self, embed: Embed, limit: int = 20_000) -> None:
        self._embed = embed
        self.limit = limit
        self.seen: dict[str, np.ndarray] = {}

    async def of(self, wanted: Sequence[str]) -> None:
        wanted = list(dict.fromkeys(wanted))
        new = [w for w in wanted if w not in self.seen]
        if not new:
            return
        rows = np.asarray(await self._embed(new), dtype=np.float32)
        norms = np.linalg.norm(rows, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        if len(self.seen) + len(new) > self.limit:
            # The words this call reads back (matrix) stay, whatever their age.
            now = set(wanted)
            old = [w for w in self.seen if w not in now]
            over = len(self.seen) + len(new) - self.limit
            drop = set(old[: max(len(old) // 2, over)])
            self.seen = {w: v for w, v in self.seen.items() if w not in drop}
        for w, row in zip(new, rows / norms, strict=True):
            self.seen[w] = row

    def matrix(self, ws: Sequence[str]) -> np.ndarray:
        return np.stack([self.seen[w] for w in ws])


async def matches(vectors: WordVectors, query: str, texts: Sequence[str]) -> np.ndarray:
    """Each text's match to the query: the mean over the query's content words of the best
    cosine to one of the text's words (0 for a text without content words; all 0 for a
    query without them)."""
    out = np.zeros(len(texts))
    q_words = content_words(query)[:32]
    if not q_words or not texts:
        return out
    per_text = [content_words(t) for t in texts]
    await vectors.of(q_words + [w for ws in per_text for w in ws])
    q = vectors.matrix(q_words)
    for i, ws in enumerate(per_text):
        if ws:
            out[i] = float((q @ vectors.matrix(ws).T).max(axis=1).mean())
    return out


def rescore(
    ranked: Sequence[tuple[int, float]], match: np.ndarray, weight: float
) -> list[tuple[int, float]]:
    """`ranked` (best first) with scores relative to the best: its first len(match) in a
    new order by score + weight x match (ties keep their order), the rest after them."""
    if not ranked:
        return []
    top = ranked[0][1] or 1.0
    head = [(mid, s / top + weight * float(m)) for (mid, s), m in zip(ranked, match, strict=False)]
    order = sorted(range(len(head)), key=lambda i: (-head[i][1], i))
    return [head[i] for i in order] + [(mid, s / top) for mid, s in ranked[len(head) :]]
