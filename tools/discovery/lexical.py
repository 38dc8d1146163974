"""A small BM25 over tool names and descriptions (a few hundred short documents at most)."""

from __future__ import annotations

import math
import re
from collections import Counter

_WORD = re.compile(r"[a-z0-9]+")
_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])")
_STOP = frozenset(
    "a an and are as at be by for from i if in into is it its me my of on or our so that the "
    "this to up us we what when which with you your can do does please want need some get".split()
)


def _stem(word: str) -> str:
    # Light suffix stripping so "files"/"file", "listing"/"list", "created"/"create" meet.
    for suffix, keep in (("ies", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)] + keep
    return word


def terms(text: str) -> list[str]:
    spaced = _CAMEL.sub(" ", text).replace("_", " ").lower()
    return [_stem(w) for w in _WORD.findall(spaced) if w not in _STOP]


class BM25:
    def __init__(self, docs: list[str], k1: float = 1.2, b: float = 0.75) -> None:
        self.k1, self.b = k1, b
        self.docs = [Counter(terms(d)) for d in docs]
        self.lengths = [sum(c.values()) for c in self.docs]
        self.avg = (sum(self.lengths) / len(self.docs)) if self.docs else 1.0
        df: Counter[str] = Counter()
        for c in self.docs:
            df.update(c.keys())
        n = len(self.docs)
        self.idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}

    def scores(self, query: str) -> list[float]:
        q = set(terms(query))
        out = []
        for doc, length in zip(self.docs, self.lengths, strict=True):
            score = 0.0
            norm = self.k1 * (1 - self.b + self.b * length / (self.avg or 1.0))
            for t in q:
                tf = doc.get(t)
                if tf:
                    score += self.idf[t] * tf * (self.k1 + 1) / (tf + norm)
            out.append(score)
        return out
