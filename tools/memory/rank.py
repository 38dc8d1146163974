"""Hybrid ranking: fuse BM25 and vector hits, spread relevance to neighbours, weight by layer,
certainty and recency. Pure functions; tuned with bench/memory_recall.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime


@dataclass(frozen=True)
class RankWeights:
    rrf_k: float = 60.0
    bm25: float = 1.0
    vector: float = 1.0
    # Share of a neighbour's score a memory gains (memories stored one after the other in
    # one session: a question often matches one turn while its answer is the next).
    neighbour: float = 0.0
    layer: dict[str, float] = field(
        default_factory=lambda: {"long": 1.0, "session": 1.0, "mid": 0.95, "short": 0.9}
    )
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


def rrf(ranked: Sequence[int], k: float, weight: float) -> dict[int, float]:
    return {mid: weight / (k + i + 1) for i, mid in enumerate(ranked)}


def fuse(bm25_ids: Sequence[int], vec_ids: Sequence[int], w: RankWeights) -> dict[int, float]:
    """Weighted reciprocal-rank fusion of the two ranked lists."""
    out = rrf(bm25_ids, w.rrf_k, w.bm25)
    for mid, s in rrf(vec_ids, w.rrf_k, w.vector).items():
        out[mid] = out.get(mid, 0.0) + s
    return out


def spread(
    scores: dict[int, float], sessions: dict[int, int | None], share: float
) -> dict[int, float]:
    """Add `share` of each memory's score to the memories right before and after it in the
    same session (ids are assigned in storing order)."""
    if share <= 0:
        return dict(scores)
    out = dict(scores)
    for mid, s in scores.items():
        sid = sessions.get(mid)
        if sid is None:
            continue
        for other in (mid - 1, mid + 1):
            if other in sessions and sessions[other] == sid:
                out[other] = out.get(other, 0.0) + share * s
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
