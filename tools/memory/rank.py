"""Hybrid ranking: fuse BM25 and vector hits, spread relevance to neighbours (a question hands
most of its score to the answer after it), favour memories made on a date the query names,
weight by layer, certainty and recency. Pure functions; measured with bench/memory_recall.py
on LoCoMo, where plain reciprocal-rank fusion scored recall@10 0.50 against BM25's 0.63, and
score fusion with neighbour spreading 0.73. The bench picks the defaults below from a small
grid by leave-one-conversation-out, so the figure it reports was not fitted to.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

# The weights recall runs with, measured on LoCoMo (bench/memory_recall.py; see the module
# docstring).
BM25_POWER = 1.5  # BM25 score / best BM25 score, raised to this power
BM25 = 1.0  # weight of that (0: words are not searched)
VECTOR = 0.2  # weight of the cosine similarity (0: vectors are not searched)
# Share of a memory's score its neighbours gain (memories stored one after the other in one
# session: a question often matches one turn while the answer is in the next).
NEIGHBOURS = {-1: 0.3, 1: 0.5, -2: 0.25, 2: 0.25}
SPREAD_FROM = 20  # only the best this many (or 2 x limit) spread; 0: all do
LAYER = {"long": 1.0, "session": 1.0, "mid": 0.95, "short": 0.9}
# A memory that asks something ("How often do you work out?") is rarely the answer: it keeps
# this share of its score and gives QUESTION_NEXT of it to the next memory.
QUESTION_SELF = 0.85
QUESTION_NEXT = 0.7
# Memories made within the date the query names (tools/memory/dates.py), or up to
# DATE_SLACK_DAYS after it (told a few days later), are multiplied by this.
DATE_BOOST = 3.0
DATE_SLACK_DAYS = 14.0
# The word-match stage (tools/memory/wordmatch.py) over the best WORD_MATCH_TOP candidates:
# each gains this weight times its word-by-word match to the query (a mean cosine), its
# score taken relative to the best. MEMORY_RERANK_WORDS sets it; 0: off.
WORD_MATCH = 1.5
WORD_MATCH_TOP = 50
CERTAINTY_FLOOR = 0.6  # certainty 0 multiplies by this, 1 by 1.0
RECENCY_DAYS = 365.0  # half-weight age of the recency bonus
RECENCY_SHARE = 0.1  # at most this much of the score comes from recency


@dataclass(frozen=True)
class RankWeights:
    """The constants above in one value, so that the benchmark can take one part of the
    ranking out or try it at other strengths (bench/recall_quality.py)."""

    bm25: float = BM25
    bm25_power: float = BM25_POWER
    vector: float = VECTOR
    neighbours: dict[int, float] = field(default_factory=lambda: dict(NEIGHBOURS))
    spread_from: int = SPREAD_FROM
    layer: dict[str, float] = field(default_factory=lambda: dict(LAYER))
    question_self: float = QUESTION_SELF
    question_next: float = QUESTION_NEXT
    date_boost: float = DATE_BOOST
    date_slack_days: float = DATE_SLACK_DAYS
    word_match: float = WORD_MATCH
    word_match_top: int = WORD_MATCH_TOP
    certainty_floor: float = CERTAINTY_FLOOR
    recency_days: float = RECENCY_DAYS
    recency_share: float = RECENCY_SHARE


@dataclass(frozen=True)
class Candidate:
    id: int
    layer: str
    certainty: float
    updated_at: datetime
    session_id: int | None
    created_at: datetime | None = None
    asks: bool = False  # the memory is a question


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
    cands: dict[int, Candidate],
    span: tuple[datetime, datetime] | None,
    w: RankWeights,
) -> dict[int, float]:
    """Multiply the scores of memories made within `span` (plus the slack) by the boost."""
    if span is None or w.date_boost == 1.0:
        return scores
    start, end = span[0], span[1] + timedelta(days=w.date_slack_days)
    out = dict(scores)
    for mid, c in cands.items():
        if mid in out and c.created_at is not None and start <= c.created_at < end:
            out[mid] *= w.date_boost
    return out


def weigh(
    scores: dict[int, float], cands: dict[int, Candidate], now: datetime, w: RankWeights
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
    out.sort(key=lambda t: (-t[1], -t[0]))
    return out
