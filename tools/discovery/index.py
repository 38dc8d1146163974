"""Ranks tools for a described need: BM25 over names and descriptions, fused with vectors.

The halves are the memory's: BM25 over words, and the memory's WordLlama embedder (offline).
They are merged by weighted reciprocal-rank fusion rather than the memory's score fusion:
on bench/tools_budget.py's 63 needs over 200 tools RRF found the tool in the top 3 for
0.905 of them, score fusion (tools/memory/rank.fuse, any weights tried) for at most 0.89;
short tool descriptions give flat cosines and BM25 scores that ranks compare better.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import numpy as np

from tools.discovery.lexical import BM25
from tools.memory.embeddings import normalise_rows

# texts -> one row per text (any width); rows need not be normalised.
EmbedFn = Callable[[list[str]], np.ndarray]
RRF_K = 60.0
# Vectors weigh more than words: needs are said in the user's words, rarely the tool's.
VECTOR_WEIGHT = 1.5
_SERVER_TAG = re.compile(r"^\[[^\]]*\]\s*")


def tool_document(name: str, description: str) -> str:
    # Names carry meaning too ("calendar__create_event"), so they are part of the text.
    return f"{name.replace('__', ' ').replace('_', ' ')}. {_SERVER_TAG.sub('', description)}"


def rrf(words: Sequence[int], vectors: Sequence[int], k: float = RRF_K) -> dict[int, float]:
    """Weighted reciprocal-rank fusion of the two rankings."""
    out = {doc: 1.0 / (k + i + 1) for i, doc in enumerate(words)}
    for i, doc in enumerate(vectors):
        out[doc] = out.get(doc, 0.0) + VECTOR_WEIGHT / (k + i + 1)
    return out


class ToolIndex:
    def __init__(self, docs: Sequence[tuple[str, str]], embed: EmbedFn | None = None) -> None:
        self.names = [n for n, _ in docs]
        texts = [tool_document(n, d) for n, d in docs]
        self.bm25 = BM25(texts)
        self.embed = embed
        self.vectors: np.ndarray | None = None
        self.desc_vectors: np.ndarray | None = None
        if embed is not None and texts:
            self.vectors = normalise_rows(embed(texts))
            # A second view without the name: a name's words can pull a short
            # description away from what it says; the better of the two views counts.
            self.desc_vectors = normalise_rows(embed([_SERVER_TAG.sub("", d) for _, d in docs]))

    def mentions(self, text: str, names: set[str]) -> bool:
        """Whether `text` shares a word with one of `names`' documents: words only, as the
        vector half ranks every tool for any text."""
        if not names or not text.strip():
            return False
        lex = self.bm25.scores(text)
        return any(score > 0 and n in names for n, score in zip(self.names, lex, strict=True))

    def search(self, query: str, limit: int = 5) -> list[str]:
        """The names of the tools that best match `query`, best first."""
        if not self.names or not query.strip():
            return []
        lex = self.bm25.scores(query)
        lex_rank = [i for i in np.argsort(lex)[::-1] if lex[i] > 0]
        vec_rank: list[int] = []
        if self.vectors is not None and self.embed is not None:
            q = normalise_rows(self.embed([query]))[0]
            sims = self.vectors @ q
            if self.desc_vectors is not None:
                sims = np.maximum(sims, self.desc_vectors @ q)
            vec_rank = [int(i) for i in np.argsort(sims)[::-1][: max(limit * 4, 20)]]
        fused = rrf([int(i) for i in lex_rank], vec_rank)
        ordered = sorted(fused.items(), key=lambda kv: kv[1], reverse=True)[:limit]
        return [self.names[i] for i, _ in ordered]
