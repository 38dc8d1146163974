"""Memory benchmark: LoCoMo retrieval quality and recall/insert speed.

Quality: every dialog turn of a LoCoMo conversation is stored as a memory of one user (one
chat session per LoCoMo session, so neighbouring turns are neighbouring memories, each
stamped with its session's date; one database per conversation), every question of
categories 1-4 is recalled, and recall@5/10/50 of the evidence turns is reported per
category and overall: for the shipped ranking (hybrid), with one part of it off (ablation
rows), BM25 alone, vectors alone and two textbook baselines. Then leave-one-conversation-
out: for each conversation, the weights of a small grid best on the others are scored on
it; the mean of those left-out scores is the figure not fitted to the data it reports.

Speed: recall p50/p95 with 10k and 100k memories of one user and 100k over 100 users,
and the insert rate through MemoryStore.store (embedding, de-duplication, three indexes).

Usage: python bench/memory_recall.py [--data ../shared/data/locomo_dev3.json]
                                     [--quality-only | --speed-only] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import logging
import os
import random
import re
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from bot.config import load_settings  # noqa: E402
from db.engine import SessionFactory, create_engine, session_factory  # noqa: E402
from db.migrate import upgrade  # noqa: E402
from db.models.memory import Memory  # noqa: E402
from db.repos import core  # noqa: E402
from db.repos import memory as repo  # noqa: E402
from tools.memory.embeddings import WordLlamaEmbedder  # noqa: E402
from tools.memory.rank import RankWeights  # noqa: E402
from tools.memory.store import MemoryStore  # noqa: E402

KS = (5, 10, 50)
BASE = RankWeights()
OFF = {
    "neighbours": {},
    "question_self": 1.0,
    "question_next": 0.0,
    "date_boost": 1.0,
    "feedback": 0.0,
}
# name: (BM25 on, vectors on, weights). hybrid is the shipped default; the no-* rows each
# take one part of it out (dates, questions), the feedback row adds pseudo-relevance
# feedback (off by default: a third more CPU a recall), "before" is the ranking before
# dates and questions (issue 15); the *-plain rows are the baselines:
# BM25 alone, and reciprocal-rank fusion of BM25 and vectors (k = 60).
MODES: dict[str, tuple[bool, bool, RankWeights]] = {
    "hybrid": (True, True, BASE),
    "no-dates": (True, True, replace(BASE, date_boost=1.0)),
    "no-quest": (True, True, replace(BASE, question_self=1.0, question_next=0.0)),
    "feedback": (True, True, replace(BASE, feedback=0.3)),
    "before": (True, True, replace(BASE, date_boost=1.0, question_self=1.0, question_next=0.0)),
    "bm25": (True, False, BASE),
    "vectors": (False, True, BASE),
    "bm25-plain": (True, False, replace(BASE, **OFF)),
    "rrf-plain": (True, True, replace(BASE, **OFF)),
}
# The weights leave-one-conversation-out chooses from: each part of the ranking off or at
# a few strengths (BM25/vector balance and neighbour shares were measured flat around BASE).
GRID = [
    replace(BASE, date_boost=d, question_self=qs, question_next=qn)
    for d in (1.0, 2.0, 3.0)
    for qs, qn in ((1.0, 0.0), (0.85, 0.7), (0.7, 0.8))
]
T0 = datetime(2026, 1, 1, tzinfo=UTC)


class Clock:
    """The bench's clock: set to each LoCoMo session's date while its turns are stored."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def clock() -> datetime:
    return T0


async def open_db(folder: Path, backend: str = "sqlite") -> tuple[Any, SessionFactory, Any]:
    """A fresh database: a SQLite file in `folder`, or (backend postgres) a new database on
    the server DATABASE_URL names (scripts/with-pg.sh starts a throwaway one)."""
    extra: dict[str, Any] = {}
    if backend == "postgres":
        import asyncpg
        from sqlalchemy.engine import make_url

        server = make_url(os.environ["DATABASE_URL"])
        name = f"bench_{os.getpid()}_{folder.name.lower().replace('-', '_')}"
        conn = await asyncpg.connect(
            host=server.host, port=server.port, user=server.username,
            password=server.password, database=server.database or "postgres",
        )  # fmt: skip
        await conn.execute(f"CREATE DATABASE {name}")
        await conn.close()
        extra["database_url"] = server.set(database=name).render_as_string(hide_password=False)
    settings = load_settings(data_dir=folder, llm_model="bench", **extra)
    engine = create_engine(settings.db_url)
    await upgrade(engine)
    return engine, session_factory(engine), settings


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


async def rrf_plain(store: MemoryStore, user_id: int, question: str) -> list[int]:
    """Reciprocal-rank fusion (k = 60) of the BM25-only and vectors-only rankings."""
    store.use_bm25, store.use_vectors = True, False
    words = [h.id for h in await store.recall(user_id=user_id, query=question, limit=100)]
    store.use_bm25, store.use_vectors = False, True
    meaning = [h.id for h in await store.recall(user_id=user_id, query=question, limit=100)]
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
        out.append((cat, [len(wanted & set(got[:k])) / len(wanted) for k in KS]))
    return out


async def conversation_rows(
    conv: dict[str, Any], emb: WordLlamaEmbedder
) -> tuple[dict[str, list[Row]], list[list[Row]]]:
    """One conversation in a database of its own (BM25's word statistics are its own, as
    for a user alone): the rows of every mode, and of every weight set of GRID."""
    with tempfile.TemporaryDirectory() as tmp:
        engine, sf, settings = await open_db(Path(tmp))
        clk = Clock()
        store = MemoryStore(sf, emb, settings, clk)
        user_id, ids = await load_conversation(sf, store, conv, 1000, clk)
        questions = []
        for qa in conv["qa"]:
            cat = qa.get("category")
            wanted = {ids[e] for e in evidence_ids(qa.get("evidence", [])) if e in ids}
            if cat in (1, 2, 3, 4) and wanted:
                questions.append((int(cat), str(qa["question"]), wanted))
        modes = {}
        for mode, (b, v, weights) in MODES.items():
            store.use_bm25, store.use_vectors, store.weights = b, v, weights
            modes[mode] = await score(store, user_id, questions, mode)
        store.use_bm25 = store.use_vectors = True
        grid = []
        for weights in GRID:
            store.weights = weights
            grid.append(await score(store, user_id, questions, "hybrid"))
        await engine.dispose()
    return modes, grid


def mean_r10(rows: list[Row]) -> float:
    return float(np.mean([r[1][1] for r in rows])) if rows else 0.0


def print_rows(mode: str, rows: list[Row]) -> None:
    for cat in ["1", "2", "3", "4", "all"]:
        sel = [r for c, r in rows if cat == "all" or str(c) == cat]
        if sel:
            cells = " ".join(f"{m:6.3f}" for m in np.mean(np.array(sel), axis=0))
            print(f"{mode:8} {cat:8} {len(sel):5d} {cells}")


def describe(w: RankWeights) -> str:
    return f"date x{w.date_boost:g}, question {w.question_self:g}/{w.question_next:g}"


async def quality(data: Path, quick: bool) -> None:
    convs = json.loads(data.read_text())  # noqa: ASYNC240 - a benchmark, read once
    if quick:
        convs = convs[:1]
    emb = WordLlamaEmbedder()
    per_conv = [await conversation_rows(conv, emb) for conv in convs]
    n = sum(len(m["hybrid"]) for m, _ in per_conv)
    print(f"LoCoMo {data.name}: {len(convs)} conversations, {n} questions (categories 1-4)")
    print(f"{'mode':8} {'category':8} {'n':>5} " + " ".join(f"{'R@' + str(k):>6}" for k in KS))
    for mode in MODES:
        print_rows(mode, [r for m, _ in per_conv for r in m[mode]])
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
            range(len(GRID)),
            key=lambda g: mean_r10([r for j in others for r in per_conv[j][1][g]]),
        )
        rows = per_conv[i][1][best]
        left_out += rows
        inside = mean_r10(per_conv[i][0]["hybrid"])
        folds.append((inside, mean_r10(rows)))
        name = conv.get("sample_id", f"#{i}")
        print(
            f"  left out {name:8} R@10 {folds[-1][1]:.3f} (shipped {inside:.3f}) "
            f"with {describe(GRID[best])}"
        )
    ins, out = np.mean([f[0] for f in folds]), np.mean([f[1] for f in folds])
    print(f"  mean of the conversations' R@10: in-sample {ins:.3f}, left-out {out:.3f}")
    every = range(len(convs))
    best = max(
        range(len(GRID)), key=lambda g: mean_r10([r for j in every for r in per_conv[j][1][g]])
    )
    print(f"  best on all conversations (the shipped defaults): {describe(GRID[best])}")
    print_rows("left-out", left_out)


# -- speed ------------------------------------------------------------------------------

WORDS = (
    "dog cat garden coffee tea berlin paris meeting project budget doctor dentist sister "
    "brother mother father friend birthday gift concert guitar piano running marathon "
    "swimming book novel movie series recipe pasta curry bakery office laptop phone car "
    "bike train flight hotel beach mountain hiking camping painting photo camera school "
    "university exam course job interview salary rent flat house kitchen plants allergy "
    "vitamin gym yoga chess football tennis weekend holiday christmas summer winter spring"
).split()


def sentence(rng: random.Random, vocab: list[str] = WORDS) -> str:
    return " ".join(rng.choice(vocab) for _ in range(rng.randint(5, 14))).capitalize()


def corpus_words(data: Path) -> list[str]:
    """Every word of the LoCoMo turns, repeats kept (so sampling follows real word
    frequencies); the small built-in list when the file is absent (BM25 then matches far
    more memories per query than real text does, so recall is slower than real)."""
    if not data.exists():
        return WORDS
    convs = json.loads(data.read_text())
    out: list[str] = []
    for conv in convs:
        for key, turns in conv["conversation"].items():
            if key.startswith("session_") and isinstance(turns, list):
                for turn in turns:
                    out += re.findall(r"[A-Za-z']+", turn["text"])
    return out or WORDS


async def bulk_fill(
    sf: SessionFactory,
    emb: WordLlamaEmbedder,
    users: list[int],
    per_user: int,
    seed: int,
    vocab: list[str],
) -> None:
    """Fill fast through the same repository statements, in big transactions."""
    rng = random.Random(seed)
    for user_id in users:
        done = 0
        while done < per_user:
            n = min(2000, per_user - done)
            texts = [sentence(rng, vocab) for _ in range(n)]
            vecs = emb.embed_sync(texts)
            async with sf() as s, s.begin():
                for t, v in zip(texts, vecs, strict=True):
                    m = Memory(
                        user_id=user_id,
                        layer=rng.choice(["long", "mid", "short"]),
                        content=t,
                        certainty=1.0,
                        created_at=T0,
                        updated_at=T0,
                        expires_at=None if rng.random() < 0.5 else T0 + timedelta(days=60),
                    )
                    await repo.insert(s, m, v.astype(np.float32).tobytes())
            done += n


async def make_users(sf: SessionFactory, n: int) -> list[int]:
    out = []
    async with sf() as s, s.begin():
        for i in range(n):
            out.append((await core.get_or_create_user(s, 5000 + i, f"u{i}", T0)).id)
    return out


async def time_recall(
    store: MemoryStore, users: list[int], vocab: list[str], n: int = 60
) -> tuple[float, float]:
    rng = random.Random(7)
    times = []
    for i in range(n):
        q = " ".join(rng.choice(vocab) for _ in range(rng.randint(4, 10)))
        start = time.perf_counter()
        await store.recall(user_id=users[i % len(users)], query=q, limit=10)
        times.append((time.perf_counter() - start) * 1000)
    times = times[5:]  # warm-up
    return statistics.median(times), float(np.percentile(times, 95))


async def speed(quick: bool, data: Path, backends: list[str]) -> None:
    emb = WordLlamaEmbedder()
    vocab = corpus_words(data)
    sizes = [
        ("10k, 1 user", 1, 10_000),
        ("100k, 1 user", 1, 100_000),
        ("100k, 100 users", 100, 1_000),
    ]
    if quick:
        sizes = [("2k, 1 user", 1, 2_000), ("10k, 1 user", 1, 10_000), ("10k, 10 users", 10, 1_000)]
    for (label, n_users, per_user), backend in itertools.product(sizes, backends):
        label = f"{backend} {label}"
        with tempfile.TemporaryDirectory() as tmp:
            engine, sf, settings = await open_db(Path(tmp), backend)
            store = MemoryStore(sf, emb, settings, clock)
            users = await make_users(sf, n_users)
            await store.index_status()  # records the embedder, as the app does at startup
            await bulk_fill(sf, emb, users, per_user, n_users, vocab)
            p50, p95 = await time_recall(store, users, vocab)
            print(f"recall {label:16} p50 {p50:7.2f} ms   p95 {p95:7.2f} ms")
            if label.endswith(("10k, 1 user", "100k, 1 user")):
                rng = random.Random(3)
                n = 500
                start = time.perf_counter()
                for _ in range(n):
                    await store.store(user_id=users[0], layer="mid", content=sentence(rng, vocab))
                rate = n / (time.perf_counter() - start)
                print(
                    f"insert {label:16} {rate:7.0f} memories/s (store(): embed, dedup, 3 indexes)"
                )
            await engine.dispose()


async def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--data", type=Path, default=ROOT / ".." / "shared" / "data" / "locomo_dev3.json"
    )
    p.add_argument("--quick", action="store_true", help="one conversation, smaller speed sizes")
    p.add_argument("--quality-only", action="store_true")
    p.add_argument("--speed-only", action="store_true")
    p.add_argument(
        "--backend",
        choices=["sqlite", "postgres"],
        default="sqlite",
        help="postgres: time PostgreSQL (DATABASE_URL, see make bench-pg) beside SQLite",
    )
    args = p.parse_args()
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("alembic").setLevel(logging.WARNING)
    if not args.speed_only:
        if args.data.exists():
            await quality(args.data.resolve(), args.quick)
        else:
            print(
                f"LoCoMo data not found at {args.data}: skipping the quality part "
                "(pass --data PATH to a LoCoMo-format JSON file)"
            )
    if not args.quality_only:
        backends = ["sqlite", "postgres"] if args.backend == "postgres" else ["sqlite"]
        await speed(args.quick, args.data, backends)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
