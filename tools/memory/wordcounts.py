"""How many memories hold each query word, cached, to prune the commonest words from BM25.

On a big store a common word makes FTS5 walk a long posting list; keeping only the rarest
words whose counts add up to `budget` bounds that work and never bites below ~5k memories.
"""

from __future__ import annotations

from typing import Any

from tools.memory import repo
from tools.memory.text import prune, words

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

    async def keep(self, s: Any, terms: list[str]) -> list[str]:
        """The rarest of `terms` (at least one) whose counts fit the budget."""
        if self.writes >= REFRESH_WRITES:
            self.freqs.clear()
            self.writes = 0
        new = [w for w in terms if w not in self.freqs]
        if new:
            if len(self.freqs) > MAX_WORDS:
                self.freqs.clear()
            self.freqs.update(await repo.doc_freqs(s, new))
        return prune([(w, self.freqs[w][1]) for w in terms], self.budget)

    async def shared(self, s: Any, texts: list[str], skip: list[str], n: int) -> list[str]:
        """Up to `n` words of `texts` not in `skip`: those in the most texts first, the
        rarer first among equals (numbers and words under 3 letters left out)."""
        seen: dict[str, int] = {}
        for t in texts:
            for w in set(words(t)):
                if len(w) > 2 and not w.isdigit() and w not in skip:
                    seen[w] = seen.get(w, 0) + 1
        new = [w for w in seen if w not in self.freqs]
        if new:
            self.freqs.update(await repo.doc_freqs(s, new))
        return sorted(seen, key=lambda w: (-seen[w], self.freqs[w][1]))[:n]
