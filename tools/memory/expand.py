"""Query expansion through the embedding's word space: each content word of the query brings
its nearest words among the words the user's memories use ("instruments" -> guitar, violin;
"kids" -> children, son), searched in a second, down-weighted BM25 round.

A multi-hop or inference question rarely shares words with its evidence ("Which cities has
Jon visited?" / "a trip to Rome"); the sentence vector of the whole question does not bridge
that, but word-to-word similarity in the same static embedding often does. Off by default
(RankWeights.expand); measured as the "expand" rows of bench/memory_recall.py.

The vocabulary is the user's own raw words (not FTS5's stems, whose vectors are poor: "citi",
"danc"), embedded once per process and extended as memories are stored; a word of a deleted
memory may linger, which costs nothing but a BM25 term that matches nothing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import numpy as np

from db.repos import memory as repo
from tools.memory.rank import RankWeights, fuse
from tools.memory.text import words
from tools.memory.wordcounts import WordCounts

Embed = Callable[[list[str]], Awaitable[np.ndarray]]
Hits = list[tuple[int, float]]


def _wanted(w: str) -> bool:
    return len(w) > 2 and w.isalpha()


class UserWords:
    """One user's distinct words and their unit vectors (rows of `vecs`)."""

    def __init__(self) -> None:
        self.index: dict[str, int] = {}
        self.vecs = np.zeros((0, 0), dtype=np.float32)
        self.pending: dict[str, None] = {}  # seen, not embedded yet (in order)

    def note(self, text: str) -> None:
        for w in words(text):
            if _wanted(w) and w not in self.index and w not in self.pending:
                self.pending[w] = None

    async def settle(self, embed: Embed) -> None:
        """Embed the words noted since the last call."""
        new = list(self.pending)
        self.pending = {}
        if not new:
            return
        rows = np.asarray(await embed(new), dtype=np.float32)
        base = len(self.index)
        for i, w in enumerate(new):
            self.index[w] = base + i
        self.vecs = rows if self.vecs.size == 0 else np.vstack([self.vecs, rows])

    def nearest(
        self, qvecs: np.ndarray, skip: set[str], per_word: int, floor: float
    ) -> list[tuple[str, float]]:
        """Up to `per_word` words (not in `skip`) at cosine >= `floor` from each query word
        vector, the most similar first overall."""
        if self.vecs.size == 0 or qvecs.size == 0:
            return []
        names = list(self.index)
        sims = qvecs @ self.vecs.T
        best: dict[str, float] = {}
        for row in sims:
            k = min(per_word + len(skip), row.shape[0])
            top = np.argpartition(-row, k - 1)[:k]
            got = 0
            for i in top[np.argsort(-row[top])]:
                w, sim = names[i], float(row[i])
                if sim < floor or got >= per_word:
                    break
                if w in skip:
                    continue
                got += 1
                best[w] = max(best.get(w, 0.0), sim)
        return sorted(best.items(), key=lambda t: -t[1])


class Expander:
    """Per-user word vocabularies, loaded on a user's first expanded recall."""

    def __init__(self, embed: Embed) -> None:
        self._embed = embed
        self.users: dict[int, UserWords] = {}

    def note(self, user_id: int, text: str) -> None:
        """A stored memory's words join its user's vocabulary (if that one is loaded)."""
        uw = self.users.get(user_id)
        if uw is not None:
            uw.note(text)

    async def load(self, user_id: int, texts: Callable[[], Awaitable[Iterable[str]]]) -> UserWords:
        uw = self.users.get(user_id)
        if uw is None:
            uw = UserWords()
            for t in await texts():
                uw.note(t)
            self.users[user_id] = uw
        await uw.settle(self._embed)
        return uw

    async def expand(
        self, uw: UserWords, terms: list[str], per_word: int, floor: float
    ) -> list[str]:
        """The words near the query's words (none of the query's own)."""
        asked = [t for t in terms if _wanted(t)]
        if not asked:
            return []
        qvecs = np.asarray(await self._embed(asked), dtype=np.float32)
        return [w for w, _ in uw.nearest(qvecs, set(terms), per_word, floor)]


async def by_neighbours(
    s: Any,
    user_id: int,
    expander: Expander,
    counts: WordCounts,
    terms: list[str],
    scores: dict[int, float],
    w: RankWeights,
    bm25: Callable[[list[str]], Awaitable[Hits]],
) -> dict[int, float]:
    """A second BM25 round on the query words' nearest words, added with weight w.expand."""
    uw = await expander.load(user_id, lambda: repo.contents(s, user_id))
    near = await expander.expand(uw, terms, w.expand_words, w.expand_floor)
    if not near:
        return scores
    # A neighbour that is only an inflection of a query word ("city" for "cities") is the
    # same FTS5 term: it would repeat the first round. Words no memory holds any more go too.
    await counts.keep(s, terms + near)
    stems = {counts.freqs[t][0] for t in terms}
    extra = [x for x in near if counts.freqs[x][1] > 0 and counts.freqs[x][0] not in stems]
    extra = extra[: w.expand_terms]
    if not extra:
        return scores
    again = fuse(await bm25(terms + extra if w.expand_with_query else extra), [], w)
    return {m: scores.get(m, 0.0) + w.expand * again.get(m, 0.0) for m in scores | again}
