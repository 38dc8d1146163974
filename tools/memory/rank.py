"""Ranking a recall's candidates, after the search (tools/memory/store.py) found them.

Hybrid ranking: fuse BM25 and vector hits, spread relevance to neighbours (a question hands
most of its score to the answer after it), favour memories made on a date the query names,
weight by layer, certainty and recency. bench/memory_recall.py measures it on LoCoMo against
plain reciprocal-rank fusion and BM25 alone, and picks the defaults below from a small grid
by leave-one-conversation-out. The stages are pure functions; rerank() reads the facts they
need in one light query (no text).

Dates a query names ("on 3 June, 2023", "in May", "last week", "two days ago") become a
time span (tools/memory/text.py query_span). A memory's date is when it was stored (`created_at`):
what was said on a day is stored that day. Many of LoCoMo's single-hop misses named the
day of the conversation they asked about.

Last, the word-match stage: a second look at the best fused candidates by late interaction
with the static word embedding. Each content word of the query takes its best cosine to a
word of the memory; the mean of those is the memory's match, added to its relevance (the
best candidate's score = 1) with weight RankWeights.word_match. The match is added as it
is, not rescaled over the candidates: among a handful of them, rescaling would turn a small
difference into the whole range and override the date and question parts. A multi-hop or
inference question rarely repeats its evidence's words ("instruments" / "plays the
violin", "kids" / "my son"): BM25 misses them and the one averaged vector of a sentence
blurs them, while word-to-word similarity in the same embedding finds them (the "no-words"
row and `--rerank words` of bench/memory_recall.py). Word vectors are made by a static
embedder (WordLlama: a word's vector is a lookup and an average), kept per process (WordVectors).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from operator import itemgetter
from typing import Any

import numpy as np

from tools.memory import repo
from tools.memory.text import query_span, words


@dataclass(frozen=True)
class RankWeights:
    """The weights recall runs with (bench/memory_recall.py picks them), in one value so
    that the benchmark can take one part of the ranking out or try it at other strengths
    (bench/recall_quality.py)."""

    bm25: float = 1.0  # weight of the BM25 part (0: words are not searched)
    bm25_power: float = 1.5  # BM25 score / best BM25 score, raised to this power
    vector: float = 0.2  # weight of the cosine similarity (0: vectors are not searched)
    # Share of a memory's score its neighbours gain (memories stored one after the other in
    # one session: a question often matches one turn while the answer is in the next).
    neighbours: dict[int, float] = field(
        default_factory=lambda: {-1: 0.3, 1: 0.5, -2: 0.25, 2: 0.25}
    )
    spread_from: int = 20  # only the best this many (or 2 x limit) spread; 0: all do
    layer: dict[str, float] = field(
        default_factory=lambda: {"long": 1.0, "session": 1.0, "mid": 0.95, "short": 0.9}
    )
    # A memory that asks something ("How often do you work out?") is rarely the answer: it
    # keeps this share of its score and gives question_next of it to the next memory.
    question_self: float = 0.85
    question_next: float = 0.7
    # Memories made within the date the query names (query_span below), or up to
    # date_slack_days after it (told a few days later), are multiplied by this.
    date_boost: float = 3.0
    date_slack_days: float = 14.0
    # The word-match stage (below) over the best word_match_top candidates: each gains this
    # weight times its word-by-word match to the query (a mean cosine), its score taken
    # relative to the best; 0: off.
    word_match: float = 1.5
    word_match_top: int = 50
    certainty_floor: float = 0.6  # certainty 0 multiplies by this, 1 by 1.0
    recency_days: float = 365.0  # half-weight age of the recency bonus
    recency_share: float = 0.1  # at most this much of the score comes from recency


def fuse(
    bm25_hits: Sequence[tuple[int, float]],
    vec_hits: Sequence[tuple[int, float]],
    w: RankWeights,
) -> dict[int, float]:
    """Score fusion: normalised BM25 (higher is better) plus weighted cosine similarity
    (vec_hits carry cosine distances). Measured better than reciprocal-rank fusion, which
    throws away how much better the best word match is than the rest."""
    out: dict[int, float] = {}
    if bm25_hits:
        best = max(s for _, s in bm25_hits) or 1.0
        for mid, s in bm25_hits:
            out[mid] = w.bm25 * max(s / best, 0.0) ** w.bm25_power
    for mid, dist in vec_hits:
        out[mid] = out.get(mid, 0.0) + w.vector * max(0.0, 1.0 - dist)
    return out


def spread(
    scores: dict[int, float],
    sessions: dict[int, int | None],
    shares: dict[int, float],
    asks: set[int] | frozenset[int] = frozenset(),
    question: tuple[float, float] = (1.0, 0.0),
) -> dict[int, float]:
    """Add a share of each memory's score to the memories stored just before and after it
    in the same session (ids are assigned in storing order). A memory in `asks` (a question)
    keeps `question[0]` of its own score and gives `question[1]` of it to the next one."""
    out = dict(scores)
    keep, answer = question
    for mid, s in scores.items():
        sid = sessions.get(mid)
        if sid is None:
            continue
        for offset, share in shares.items():
            if offset == 1 and mid in asks:
                share = max(share, answer)
            other = mid + offset
            if share > 0 and sessions.get(other, -1) == sid:
                out[other] = out.get(other, 0.0) + share * s
    for mid in asks:
        if mid in scores:
            out[mid] -= (1.0 - keep) * scores[mid]
    return out


def on_date(
    scores: dict[int, float],
    cands: dict[int, repo.Facts],
    span: tuple[datetime, datetime] | None,
    w: RankWeights,
) -> dict[int, float]:
    """Multiply the scores of memories made within `span` (plus the slack) by the boost."""
    if span is None or w.date_boost == 1.0:
        return scores
    start, end = span[0], span[1] + timedelta(days=w.date_slack_days)
    out = dict(scores)
    for mid, c in cands.items():
        if mid in out and start <= c.created_at < end:
            out[mid] *= w.date_boost
    return out


def weigh(
    scores: dict[int, float], cands: dict[int, repo.Facts], now: datetime, w: RankWeights
) -> list[tuple[int, float]]:
    """Final order: fused score times layer, certainty and recency factors."""
    out = []
    for mid, s in scores.items():
        c = cands.get(mid)
        if c is None:
            continue
        age_days = max((now - c.updated_at).total_seconds() / 86400.0, 0.0)
        recency = (
            1.0 - w.recency_share + w.recency_share * w.recency_days / (w.recency_days + age_days)
        )
        certainty = w.certainty_floor + (1 - w.certainty_floor) * max(0.0, min(c.certainty, 1.0))
        out.append((mid, s * w.layer.get(c.layer, 1.0) * certainty * recency))
    out.sort(key=itemgetter(1, 0), reverse=True)
    return out


# The ranking of one recall: one read of the candidates' facts, then the stages above.


def visible(
    f: repo.Facts, wanted: list[str], session_id: int | None, group: int | None = None
) -> bool:
    """Whether a memory may be returned: a wanted layer, said in `group` (when given), and
    a session memory only of a live session (of `session_id`, when given)."""
    if f.layer not in wanted:
        return False
    if group is not None and f.chat_id != group:
        return False
    if f.layer == "session":
        if f.session_ended:
            return False
        if session_id is not None and f.session_id != session_id:
            return False
    return True


async def rerank(
    s: Any,
    user_id: int,
    query: str,
    scores: dict[int, float],
    now: datetime,
    wanted: list[str],
    session_id: int | None,
    w: RankWeights,
    limit: int,
    group: int | None = None,
) -> tuple[list[tuple[int, float]], dict[int, repo.Facts]]:
    """Spread to neighbours, boost the date the query names, weigh: best first; and the
    facts read (they hold the rows of the memories returned: repo.row_of)."""
    offsets = [d for d, share in w.neighbours.items() if share > 0]
    # Neighbours of only the best candidates (twice `limit`, at least `spread_from`) are
    # read: a weak candidate's share does not lift a neighbour into the answer (LoCoMo
    # recall@10 the same to 3 decimals), and this read is the biggest of a recall's SQL.
    n = max(w.spread_from, 2 * limit) if w.spread_from else None
    sources = sorted(scores, key=scores.__getitem__, reverse=True)[:n]
    around = set(scores) | {i + d for i in sources for d in offsets}
    span = query_span(query, now)
    facts = await repo.facts(s, user_id, sorted(around), now)
    sessions = {mid: f.session_id for mid, f in facts.items()}
    asks = {mid for mid, f in facts.items() if f.asks}
    scores = spread(scores, sessions, w.neighbours, asks, (w.question_self, w.question_next))
    cands = {
        mid: f
        for mid, f in facts.items()
        if mid in scores and visible(f, wanted, session_id, group)
    }
    return weigh(on_date(scores, cands, span, w), cands, now, w), facts


# The word-match stage.

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
    # One product for all the texts, not one each (a recall's word match was mostly those
    # calls): every distinct word's cosines to the query's words, one row a word; each
    # text's rows follow one another, so one reduceat takes each text's best per query word.
    row: dict[str, int] = {}
    rows = [row.setdefault(w, len(row)) for ws in per_text for w in ws]
    found = [i for i, ws in enumerate(per_text) if ws]
    if not found:
        return out
    starts = np.cumsum([0] + [len(per_text[i]) for i in found[:-1]])
    cosines = (vectors.matrix(list(row)) @ vectors.matrix(q_words).T)[rows]
    out[found] = np.maximum.reduceat(cosines, starts, axis=0).mean(axis=1)
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
