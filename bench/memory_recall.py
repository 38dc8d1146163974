"""Memory benchmark: LoCoMo retrieval quality and recall/insert speed.

Quality: every dialog turn of a LoCoMo conversation is stored as a memory of one user (one
chat session per LoCoMo session, so neighbouring turns are neighbouring memories), every
question of categories 1-4 is recalled, and recall@5/10/50 of the evidence turns is
reported per category and overall, for the hybrid ranking, BM25 alone and vectors alone.

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
# name: (BM25 on, vectors on, neighbour spreading on). The *-plain rows are the textbook
# baselines: BM25 alone, and reciprocal-rank fusion of BM25 and vectors (k = 60).
MODES = {
    "hybrid": (True, True, True),
    "bm25": (True, False, True),
    "vectors": (False, True, True),
    "bm25-plain": (True, False, False),
    "rrf-plain": (True, True, False),
}
T0 = datetime(2026, 1, 1, tzinfo=UTC)


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


async def load_conversation(
    sf: SessionFactory, store: MemoryStore, conv: dict[str, Any], tg: int
) -> tuple[int, dict[str, int]]:
    c = conv["conversation"]
    async with sf() as s, s.begin():
        user = await core.get_or_create_user(s, tg, c.get("speaker_a", "user"), T0)
        user_id = user.id
    ids: dict[str, int] = {}
    n = 1
    while f"session_{n}" in c:
        async with sf() as s, s.begin():
            sess = await core.create_session(s, user_id, c.get(f"session_{n}_date_time"), T0)
        for turn in c[f"session_{n}"]:
            res = await store.store(
                user_id=user_id, layer="long", content=turn_text(turn), session_id=sess.id
            )
            ids[turn["dia_id"]] = res.id
        n += 1
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


async def quality(data: Path, quick: bool) -> None:
    convs = json.loads(data.read_text())  # noqa: ASYNC240 - a benchmark, read once
    if quick:
        convs = convs[:1]
    scores: dict[str, dict[str, list[list[float]]]] = {m: defaultdict(list) for m in MODES}
    with tempfile.TemporaryDirectory() as tmp:
        engine, sf, settings = await open_db(Path(tmp))
        store = MemoryStore(sf, WordLlamaEmbedder(), settings, clock)
        tuned, plain = store.weights, RankWeights(neighbours={})
        for i, conv in enumerate(convs):
            user_id, ids = await load_conversation(sf, store, conv, 1000 + i)
            for qa in conv["qa"]:
                cat = qa.get("category")
                wanted = {ids[e] for e in evidence_ids(qa.get("evidence", [])) if e in ids}
                if cat not in (1, 2, 3, 4) or not wanted:
                    continue
                for mode, (b, v, spread) in MODES.items():
                    store.use_bm25, store.use_vectors = b, v
                    store.weights = tuned if spread else plain
                    if mode == "rrf-plain":
                        got = await rrf_plain(store, user_id, qa["question"])
                    else:
                        hits = await store.recall(user_id=user_id, query=qa["question"], limit=50)
                        got = [h.id for h in hits]
                    row = [len(wanted & set(got[:k])) / len(wanted) for k in KS]
                    scores[mode][str(cat)].append(row)
                    scores[mode]["all"].append(row)
        await engine.dispose()
    n = len(scores["hybrid"]["all"])
    print(f"LoCoMo {data.name}: {len(convs)} conversations, {n} questions (categories 1-4)")
    print(f"{'mode':8} {'category':8} {'n':>5} " + " ".join(f"{'R@' + str(k):>6}" for k in KS))
    for mode in MODES:
        for cat in ["1", "2", "3", "4", "all"]:
            rows = scores[mode][cat]
            if rows:
                means = np.mean(np.array(rows), axis=0)
                cells = " ".join(f"{m:6.3f}" for m in means)
                print(f"{mode:8} {cat:8} {len(rows):5d} {cells}")


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
