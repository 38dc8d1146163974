"""Memory text as words: whitespace normalising, a query's content words and their FTS5
match, the near-duplicate test, and pruning the commonest query words from BM25.

On a big store a common word makes FTS5 walk a long posting list; keeping only the rarest
words whose counts add up to a budget bounds that work and never bites below ~5k memories.
WordCounts keeps those counts, read once per word and cached.
"""

from __future__ import annotations

import re
from typing import Any

from tools.memory import repo

# Words too common to help a BM25 match; dropping them also keeps FTS5 queries fast.
STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers herself him himself his how i if in into is it
    its itself just me more most my myself no nor not now of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself
    yourselves also get got ever s t don""".split()
)
_WORD = re.compile(r"\w+", re.UNICODE)


def normalise(text: str) -> str:
    return " ".join(text.split())


def words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in STOPWORDS]


def query_words(text: str, max_terms: int = 32) -> list[str]:
    """The query's distinct content words, in order."""
    seen: list[str] = []
    for w in words(text):
        if len(w) > 1 and w not in seen:
            seen.append(w)
    return seen[:max_terms]


def fts_match(terms: list[str]) -> str:
    """An FTS5 MATCH expression: the words OR-ed, each quoted."""
    return " OR ".join(f'"{w}"' for w in terms)


def prune(freqs: list[tuple[str, int]], budget: int) -> list[str]:
    """The rarest words whose document counts add up to at most `budget` (always at least
    the rarest one), in their original order.

    FTS5 scores every memory that holds any query word, so a word in 20% of 100k memories
    costs milliseconds while adding little (BM25 gives it a low IDF); the rare words are
    the ones that find the answer."""
    keep: set[str] = set()
    total = 0
    for w, df in sorted(freqs, key=lambda t: t[1]):
        if keep and total + df > budget:
            break
        keep.add(w)
        total += df
    return [w for w, _ in freqs if w in keep]


def same_words(a: str, b: str, threshold: float = 0.75) -> bool:
    """Whether two texts share most of their content words (Jaccard), so an embedding
    match that only shares the topic ("lives in Berlin" / "lives in Munich") is not merged."""
    wa, wb = set(words(a)) or set(a.lower().split()), set(words(b)) or set(b.lower().split())
    if not wa or not wb:
        return False
    return len(wa & wb) / len(wa | wb) >= threshold


def frame(text: str) -> str | None:
    """A fact's first two words, lower-cased ("lives in" of "Lives in Porto"), when more
    follow: two facts of one category in the same frame with different ends may contradict
    each other ("Lives in Lisbon"), or not ("Has a dog" / "Has a cat"); the model decides
    (the store's result names the older one), and recall puts the newer first."""
    found = _WORD.findall(text.lower())
    return " ".join(found[:2]) if len(found) > 2 else None


# Counts are read again after this many writes through the store.
REFRESH_WRITES = 100
MAX_WORDS = 50_000  # cached words before the cache starts over


class WordCounts:
    def __init__(self, budget: int = 5000) -> None:
        self.budget = budget
        self.freqs: dict[str, tuple[str, int]] = {}  # word -> (FTS5 term, memory count)
        self.writes = 0  # writes since the cache was filled

    def note_writes(self, n: int = 1) -> None:
        self.writes += n

    async def keep(self, s: Any, terms: list[str], memories: int) -> list[str]:
        """The rarest of `terms` (at least one) whose counts fit the budget. No word is in
        more than the `memories` there are: when that many for each word fit, every word
        stays and no count is read (the three statements a recall on a small store made)."""
        if len(terms) * memories <= self.budget:
            return terms
        if self.writes >= REFRESH_WRITES:
            self.freqs.clear()
            self.writes = 0
        new = [w for w in terms if w not in self.freqs]
        if new:
            if len(self.freqs) > MAX_WORDS:
                self.freqs.clear()
            self.freqs.update(await repo.doc_freqs(s, new))
        return prune([(w, self.freqs[w][1]) for w in terms], self.budget)
