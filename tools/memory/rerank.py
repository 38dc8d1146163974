"""The second half of a recall: from fused scores to the final order, with one light read
of the candidates and their neighbours (no text) for the facts ranking needs."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from tools.memory import repo
from tools.memory.dates import query_span
from tools.memory.rank import Candidate, RankWeights, on_date, spread, weigh


def visible(f: repo.Facts, wanted: list[str], session_id: int | None) -> bool:
    """Whether a memory may be returned: a wanted layer, and a session memory only of a
    live session (of `session_id`, when given)."""
    if f.layer not in wanted:
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
) -> tuple[list[tuple[int, float]], dict[int, repo.Facts]]:
    """Spread to neighbours, boost the date the query names, weigh: best first; and the
    facts read (they hold the rows of the memories returned: repo.row_of)."""
    offsets = [d for d, share in w.neighbours.items() if share > 0]
    # Neighbours of only the best candidates (twice `limit`, at least `spread_from`) are
    # read: a weak candidate's share does not lift a neighbour into the answer (LoCoMo
    # recall@10 the same to 3 decimals), and this read is the biggest of a recall's SQL.
    n = max(w.spread_from, 2 * limit) if w.spread_from else None
    sources = sorted(scores, key=lambda m: -scores[m])[:n]
    around = set(scores) | {i + d for i in sources for d in offsets}
    span = query_span(query, now)
    facts = await repo.facts(s, user_id, sorted(around), now, dated=span is not None)
    sessions = {mid: f.session_id for mid, f in facts.items()}
    asks = {mid for mid, f in facts.items() if f.asks}
    scores = spread(scores, sessions, w.neighbours, asks, (w.question_self, w.question_next))
    cands = {
        mid: Candidate(mid, f.layer, f.certainty, f.updated_at, f.session_id, f.created_at, f.asks)
        for mid, f in facts.items()
        if mid in scores and visible(f, wanted, session_id)
    }
    return weigh(on_date(scores, cands, span, w), cands, now, w), facts
