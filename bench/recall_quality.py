"""LoCoMo retrieval quality of the memory recall (see bench/memory_recall.py): the table
by mode and category, then leave-one-conversation-out."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import json  # noqa: E402
import re  # noqa: E402
import tempfile  # noqa: E402
from collections import defaultdict  # noqa: E402
from dataclasses import replace  # noqa: E402
from datetime import UTC, datetime, timedelta  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
from recall_common import T0, Clock, open_db  # noqa: E402
from recall_rerank import Stage, make_stage  # noqa: E402

from db.engine import SessionFactory  # noqa: E402
from db.repos import core  # noqa: E402
from tools.memory.embeddings import Embedder, WordLlamaEmbedder  # noqa: E402
from tools.memory.rank import RankWeights  # noqa: E402
from tools.memory.store import MemoryStore  # noqa: E402
from tools.memory.text import query_words  # noqa: E402

KS = (5, 10, 50)
BASE = RankWeights()
OFF = {
    "neighbours": {},
    "question_self": 1.0,
    "question_next": 0.0,
    "date_boost": 1.0,
    "word_match": 0.0,
}
WORDS_OFF = replace(BASE, word_match=0.0)
BM25_ONLY = replace(WORDS_OFF, vector=0.0)
VECTORS_ONLY = replace(WORDS_OFF, bm25=0.0)
# name: weights. hybrid is the shipped default; the no-* rows each take one part of it out
# (dates, questions, the word-match stage), "before" is the ranking before dates and
# questions (issue 15); bm25 and vectors are each half alone (the other weighted 0) and the
# *-plain rows the baselines: BM25 alone, and reciprocal-rank fusion of BM25 and vectors
# (k = 60); none of these has the word-match stage. Tried for issue 15 and 27 and not kept
# (pseudo-relevance feedback, query expansion, rescaled cosines, a Rocchio vector round, a
# session-diversity penalty, the query embedded from its content words): each within noise
# or worse on the left-out figure, and removed with their code.
MODES: dict[str, RankWeights] = {
    "hybrid": BASE,
    "no-dates": replace(BASE, date_boost=1.0),
    "no-quest": replace(BASE, question_self=1.0, question_next=0.0),
    # The word-match stage over the top 50 (tools/memory/rank.py) off: the ranking
    # before it (issue 27).
    "no-words": WORDS_OFF,
    "before": replace(WORDS_OFF, date_boost=1.0, question_self=1.0, question_next=0.0),
    # The vector weight raised (issue 15, for a contextual embedding: --embeddings endpoint).
    "vec-0.5": replace(BASE, vector=0.5),
    "vec-1.0": replace(BASE, vector=1.0),
    "bm25": BM25_ONLY,
    "vectors": VECTORS_ONLY,
    "bm25-plain": replace(BM25_ONLY, **OFF),
    "rrf-plain": replace(BASE, **OFF),
}
# The weights leave-one-conversation-out chooses from: each part of the ranking off or at
# a few strengths (BM25/vector balance and neighbour shares were measured flat around BASE).
# --vector-weights adds the vector weight to the grid (by default only the shipped one),
# --rerank words the word-match stage's weight (by default only the shipped one).
WORD_WEIGHTS = (0.0, 0.6, 0.9, 1.2, 1.5, 2.0)


def make_grid(
    vector_weights: tuple[float, ...] = (BASE.vector,),
    word_weights: tuple[float, ...] = (BASE.word_match,),
) -> list[RankWeights]:
    return [
        replace(BASE, date_boost=d, question_self=qs, question_next=qn, vector=v, word_match=m)
        for d in (1.0, 2.0, 3.0)
        for qs, qn in ((1.0, 0.0), (0.85, 0.7), (0.7, 0.8))
        for v in vector_weights
        for m in word_weights
    ]


GRID = make_grid()


def turn_text(turn: dict[str, Any]) -> str:
    text = f"{turn['speaker']}: {turn['text']}"
    if turn.get("blip_caption"):
        text += f" [shares a photo: {turn['blip_caption']}]"
    return text


def evidence_ids(raw: list[str]) -> list[str]:
    out = []
    for item in raw:
        out += [p for p in re.split(r"[;,\s]+", item) if re.fullmatch(r"D\d+:\d+", p)]
    return out


def session_date(raw: str | None, fallback: datetime) -> datetime:
    """LoCoMo's "1:56 pm on 8 May, 2023"."""
    try:
        return datetime.strptime(raw or "", "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)
    except ValueError:
        return fallback


async def load_conversation(
    sf: SessionFactory, store: MemoryStore, conv: dict[str, Any], tg: int, clk: Clock
) -> tuple[int, dict[str, int]]:
    """Store every turn, stamped with its session's date (as if said that day); the clock
    is left a day after the last session, when the questions are asked."""
    c = conv["conversation"]
    async with sf() as s, s.begin():
        user = await core.get_or_create_user(s, tg, c.get("speaker_a", "user"), T0)
        user_id = user.id
    ids: dict[str, int] = {}
    n = 1
    while f"session_{n}" in c:
        clk.now = session_date(c.get(f"session_{n}_date_time"), clk.now)
        async with sf() as s, s.begin():
            sess = await core.create_session(s, user_id, c.get(f"session_{n}_date_time"), clk.now)
        for turn in c[f"session_{n}"]:
            res = await store.store(
                user_id=user_id, layer="long", content=turn_text(turn), session_id=sess.id
            )
            ids[turn["dia_id"]] = res.id
        n += 1
    clk.now += timedelta(days=1)
    return user_id, ids


# The query each question is recalled with (--query): the question itself; the text of its
# evidence turns (the upper bound of a query the model rewrites: the very words to find);
# the question and its gold answer (a milder oracle: a query naming what the answer says);
# or the question's content words only (stop and question words dropped).
QUERIES = ("question", "evidence", "answer", "content")


async def make_queries(
    store: MemoryStore, user_id: int, conv: dict[str, Any], ids: dict[str, int], how: str
) -> list[tuple[int, str, set[int]]]:
    c = conv["conversation"]
    turns = {
        t["dia_id"]: turn_text(t)
        for k, v in c.items()
        if re.fullmatch(r"session_\d+", k)
        for t in v
    }
    out = []
    for qa in conv["qa"]:
        cat = qa.get("category")
        evidence = [e for e in evidence_ids(qa.get("evidence", [])) if e in ids]
        wanted = {ids[e] for e in evidence}
        if cat not in (1, 2, 3, 4) or not wanted:
            continue
        query = str(qa["question"])
        if how == "evidence":
            query = " ".join(turns[e] for e in dict.fromkeys(evidence))
        elif how == "answer":
            query = f"{query} {qa.get('answer', '')}"
        elif how == "content":
            query = " ".join(query_words(query)) or query
        out.append((int(cat), query, wanted))
    return out


async def rrf_plain(store: MemoryStore, user_id: int, question: str) -> list[int]:
    """Reciprocal-rank fusion (k = 60) of the BM25-only and vectors-only rankings."""
    fused = store.weights
    store.weights = replace(fused, vector=0.0)
    words = [h.id for h in await store.recall(user_id=user_id, query=question, limit=100)]
    store.weights = replace(fused, bm25=0.0)
    meaning = [h.id for h in await store.recall(user_id=user_id, query=question, limit=100)]
    store.weights = fused
    score: dict[int, float] = defaultdict(float)
    for ranked in (words, meaning):
        for rank, mid in enumerate(ranked):
            score[mid] += 1.0 / (60 + rank + 1)
    return sorted(score, key=lambda m: -score[m])[:50]


Row = tuple[int, list[float]]  # (category, recall at each of KS) of one question


async def score(
    store: MemoryStore, user_id: int, questions: list[tuple[int, str, set[int]]], mode: str
) -> list[Row]:
    out = []
    for cat, question, wanted in questions:
        if mode == "rrf-plain":
            got = await rrf_plain(store, user_id, question)
        else:
            hits = await store.recall(user_id=user_id, query=question, limit=50)
            got = [h.id for h in hits]
        out.append((cat, recall_rows(wanted, got)))
    return out


def recall_rows(wanted: set[int], got: list[int]) -> list[float]:
    return [len(wanted & set(got[:k])) / len(wanted) for k in KS]


async def conversation_rows(
    conv: dict[str, Any],
    emb: Embedder,
    weight_sets: list[RankWeights],
    how: str = "question",
    stage: Stage | None = None,
) -> tuple[dict[str, list[Row]], list[list[Row]]]:
    """One conversation in a database of its own (BM25's word statistics are its own, as
    for a user alone): the rows of every mode, and of every weight set of GRID (times every
    parameter of the rerank stage, when one is given)."""
    with tempfile.TemporaryDirectory() as tmp:
        engine, sf, settings = await open_db(Path(tmp))
        clk = Clock()
        store = MemoryStore(sf, emb, settings, clk)
        user_id, ids = await load_conversation(sf, store, conv, 1000, clk)
        questions = await make_queries(store, user_id, conv, ids, how)
        modes = {}
        for mode, weights in MODES.items():
            store.weights = weights
            modes[mode] = await score(store, user_id, questions, mode)
        grid = []
        for weights in weight_sets:
            store.weights = weights
            if stage is None:
                grid.append(await score(store, user_id, questions, "hybrid"))
                continue
            per_param: list[list[Row]] = [[] for _ in stage.params]
            for cat, question, wanted in questions:
                hits = await store.recall(user_id=user_id, query=question, limit=50)
                for i, got in enumerate(await stage.order(question, hits)):
                    per_param[i].append((cat, recall_rows(wanted, got)))
            grid += per_param
        await engine.dispose()
    return modes, grid


class SameQueries:
    """The embedder with one vector per text remembered: every mode and weight set recalls
    the same questions, and a contextual model takes milliseconds a question."""

    def __init__(self, emb: Embedder) -> None:
        self._emb, self._seen = emb, dict[str, np.ndarray]()
        self.name, self.dim = emb.name, emb.dim

    async def embed(self, texts: list[str]) -> np.ndarray:
        if len(texts) != 1:
            return await self._emb.embed(texts)
        if texts[0] not in self._seen:
            self._seen[texts[0]] = await self._emb.embed(texts)
        return self._seen[texts[0]]


def mean_r10(rows: list[Row]) -> float:
    return float(np.mean([r[1][1] for r in rows])) if rows else 0.0


def print_rows(mode: str, rows: list[Row]) -> None:
    for cat in ["1", "2", "3", "4", "all"]:
        sel = [r for c, r in rows if cat == "all" or str(c) == cat]
        if sel:
            cells = " ".join(f"{m:6.3f}" for m in np.mean(np.array(sel), axis=0))
            print(f"{mode:8} {cat:8} {len(sel):5d} {cells}")


def describe(w: RankWeights) -> str:
    return (
        f"date x{w.date_boost:g}, question {w.question_self:g}/{w.question_next:g}, "
        f"vector {w.vector:g}, words {w.word_match:g}"
    )


def split(
    convs: list[dict[str, Any]],
    per_conv: list[Any],
    points: list[Any],
    describe_point: Any,
    measured: tuple[str, ...],
) -> None:
    """The conversations named `measured` are only measured: the weights are chosen on the
    others (the tuned part), and both parts are printed, for the shipped weights and for
    the chosen ones."""
    names = [c.get("sample_id", f"#{i}") for i, c in enumerate(convs)]
    held = [i for i, n in enumerate(names) if n in measured]
    tuned = [i for i in range(len(convs)) if i not in held]
    if not held or not tuned:
        print(f"--measured {','.join(measured)}: needs some of {names} and not all of them")
        return
    best = max(
        range(len(points)), key=lambda g: mean_r10([r for j in tuned for r in per_conv[j][1][g]])
    )
    print(
        f"\nsplit: tuned on {', '.join(names[i] for i in tuned)}; measured only on "
        f"{', '.join(names[i] for i in held)}; chosen on the tuned part: {describe_point(best)}"
    )
    for label, part in (("tuned", tuned), ("measured", held)):
        print_rows(f"{label[:4]}-shp", [r for j in part for r in per_conv[j][0]["hybrid"]])
        print_rows(f"{label[:4]}-fit", [r for j in part for r in per_conv[j][1][best]])


async def quality(
    data: Path,
    quick: bool,
    emb: Embedder | None = None,
    vector_weights: tuple[float, ...] = (BASE.vector,),
    how: str = "question",
    stage_name: str = "none",
    measured: tuple[str, ...] = (),
) -> None:
    convs = json.loads(data.read_text())  # noqa: ASYNC240 - a benchmark, read once
    if quick:
        convs = convs[:1]
    emb = SameQueries(emb or WordLlamaEmbedder())
    stage = make_stage(stage_name, emb)
    GRID[:] = make_grid(
        vector_weights, WORD_WEIGHTS if stage_name == "words" else (BASE.word_match,)
    )
    params = stage.params if stage is not None else (0.0,)
    points = [(w, p) for w in GRID for p in params]

    def describe_point(g: int) -> str:
        w, p = points[g]
        return describe(w) + (f", {stage_name} {p:g}" if stage is not None else "")

    per_conv = [await conversation_rows(conv, emb, GRID, how, stage) for conv in convs]
    n = sum(len(m["hybrid"]) for m, _ in per_conv)
    print(
        f"LoCoMo {data.name}: {len(convs)} conversations, {n} questions (categories 1-4), "
        f"embeddings {emb.name}"
        + (f", query {how}" if how != "question" else "")
        + (f", rerank {stage_name}" if stage_name != "none" else "")
    )
    print(f"{'mode':8} {'category':8} {'n':>5} " + " ".join(f"{'R@' + str(k):>6}" for k in KS))
    for mode in MODES:
        print_rows(mode, [r for m, _ in per_conv for r in m[mode]])
    if measured:
        split(convs, per_conv, points, describe_point, measured)
    if len(convs) < 2:
        return
    # Leave one conversation out: choose the weights of GRID best on the others (mean R@10
    # over their questions), score them on the one left out.
    print("\nleave-one-conversation-out: weights chosen on the other conversations")
    left_out: list[Row] = []
    folds = []
    for i, conv in enumerate(convs):
        others = [j for j in range(len(convs)) if j != i]
        best = max(
            range(len(points)),
            key=lambda g: mean_r10([r for j in others for r in per_conv[j][1][g]]),
        )
        rows = per_conv[i][1][best]
        left_out += rows
        inside = mean_r10(per_conv[i][0]["hybrid"])
        folds.append((inside, mean_r10(rows)))
        name = conv.get("sample_id", f"#{i}")
        print(
            f"  left out {name:8} R@10 {folds[-1][1]:.3f} (shipped {inside:.3f}) "
            f"with {describe_point(best)}"
        )
    ins, out = np.mean([f[0] for f in folds]), np.mean([f[1] for f in folds])
    print(f"  mean of the conversations' R@10: in-sample {ins:.3f}, left-out {out:.3f}")
    every = range(len(convs))
    best = max(
        range(len(points)), key=lambda g: mean_r10([r for j in every for r in per_conv[j][1][g]])
    )
    print(f"  best on all conversations (the shipped defaults): {describe_point(best)}")
    if stage_name != "none" or how != "question":
        print_rows("best-all", [r for j in every for r in per_conv[j][1][best]])
    print_rows("left-out", left_out)
