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


@dataclass(frozen=True)
class RankWeights:
    """Defaults measured on LoCoMo (bench/memory_recall.py); see the module docstring."""

    bm25_power: float = 1.5  # BM25 score / best BM25 score, raised to this power
    vector: float = 0.2  # weight of the cosine similarity
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
    # keeps this share of its score and gives `question_next` of it to the next memory.
    question_self: float = 0.85
    question_next: float = 0.7
    # Memories made within the date the query names (tools/memory/dates.py), or up to
    # `date_slack_days` after it (told a few days later), are multiplied by this.
    date_boost: float = 3.0
    date_slack_days: float = 14.0
    # Pseudo-relevance feedback: a second BM25 round with the words the first hits share,
    # added with this weight. Off: on LoCoMo it moved recall@10 by under 0.01 and cost a
    # third more CPU a recall at 100k memories (bench/memory_recall.py, "feedback" row).
    feedback: float = 0.0
    feedback_docs: int = 3
    feedback_terms: int = 5
    # Vector similarity rescaled to 0..1 over the candidates (the best cosine gets 1): the
    # offline embedding's cosines sit in a narrow band, so raw they add a near constant.
    vector_norm: bool = False
    # Embed only the query's content words (WordLlama averages its tokens: "which", "has"
    # dilute the vector of "cities visited").
    vector_words: bool = False
    # Rocchio in vector space: a second KNN round from the query plus the centroid of the
    # first round's best memories, its similarities added with this weight (0 = off).
    feedback_vec: float = 0.0
    # Query expansion (tools/memory/expand.py): a second BM25 round on up to
    # `expand_terms` words of the user's memories nearest (cosine >= `expand_floor`, at
    # most `expand_words` per query word) to the query's words, added with this weight.
    # Off: on LoCoMo it lifts categories 1 and 3 (left-out R@10 0.398 -> 0.421, 0.263 ->
    # 0.316) but not the whole (0.762 -> 0.761; category 4 0.880 -> 0.860 when chosen by
    # leave-one-out), for 14-35 ms more a recall at 100k memories (p50, two noisy runs).
    expand: float = 0.0
    expand_words: int = 3
    expand_floor: float = 0.4
    expand_terms: int = 12
    expand_with_query: bool = False  # the second round also holds the query's own words
    # The n-th memory of one session in the ranking is multiplied by diversity ** n, so
    # that a question whose answer is spread over sessions is not filled by one session.
    diversity: float = 1.0
    # The word-match stage (tools/memory/wordmatch.py) over the best `word_match_top`
    # candidates: each gains this weight times its word-by-word match to the query (a mean
    # cosine), its score taken relative to the best; 0: off.
    word_match: float = 1.5
    word_match_top: int = 50
    certainty_floor: float = 0.6  # certainty 0 multiplies by this, 1 by 1.0
    recency_days: float = 365.0  # half-weight age of the recency bonus
    recency_share: float = 0.1  # at most this much of the score comes from recency


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
            out[mid] = max(s / best, 0.0) ** w.bm25_power
    sims = [(mid, max(0.0, 1.0 - dist)) for mid, dist in vec_hits]
    if w.vector_norm and sims:
        hi, lo = max(s for _, s in sims), min(s for _, s in sims)
        sims = [(mid, (s - lo) / (hi - lo) if hi > lo else 1.0) for mid, s in sims]
    for mid, sim in sims:
        out[mid] = out.get(mid, 0.0) + w.vector * sim
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
    return diversify(out, cands, w.diversity)


def diversify(
    ranked: list[tuple[int, float]], cands: dict[int, Candidate], decay: float
) -> list[tuple[int, float]]:
    """Scale the n-th memory of each session (in ranked order) by decay ** n."""
    if decay >= 1.0:
        return ranked
    seen: dict[int | None, int] = {}
    out = []
    for mid, s in ranked:
        sid = cands[mid].session_id
        n = seen.get(sid, 0) if sid is not None else 0
        seen[sid] = n + 1
        out.append((mid, s * decay**n))
    out.sort(key=lambda t: (-t[1], -t[0]))
    return out
