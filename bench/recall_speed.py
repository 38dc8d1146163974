"""Recall and insert speed of the memory store (see bench/memory_recall.py)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import itertools  # noqa: E402
import json  # noqa: E402
import random  # noqa: E402
import re  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from datetime import timedelta  # noqa: E402

import numpy as np  # noqa: E402
from recall_common import T0, clock, open_db  # noqa: E402

from db.engine import SessionFactory  # noqa: E402
from db.repos import core  # noqa: E402
from tools.memory import repo  # noqa: E402
from tools.memory.embeddings import Embedder, WordLlamaEmbedder, normalise_rows  # noqa: E402
from tools.memory.models import Memory  # noqa: E402
from tools.memory.store import MemoryStore  # noqa: E402

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


def fill_vectors(emb: Embedder) -> Callable[[list[str]], np.ndarray]:
    """How the bulk fill makes the stored vectors: WordLlama embeds the texts (fast); a
    contextual model would take ~10 min for 100k texts, so its rows are random unit vectors
    of its dimension (the KNN scan costs the same); the recalls embed their query for real."""
    if isinstance(emb, WordLlamaEmbedder):
        return emb.embed_sync
    rng = np.random.default_rng(0)
    return lambda texts: normalise_rows(rng.standard_normal((len(texts), emb.dim or 384)))


async def bulk_fill(
    sf: SessionFactory,
    emb: Embedder,
    users: list[int],
    per_user: int,
    seed: int,
    vocab: list[str],
) -> None:
    """Fill fast through the same repository statements, in big transactions."""
    rng = random.Random(seed)
    async with sf() as s, s.begin():  # as MemoryStore does for a first vector of a new size
        if emb.dim and await repo.vec_dim(s) != emb.dim:
            await repo.recreate_vec(s, emb.dim)
        # Stamped as the store stamps a new index: unstamped vectors read as another model's,
        # and recall would search words only ("built with unknown").
        await repo.set_meta(s, {"model": emb.name})
    for user_id in users:
        done = 0
        while done < per_user:
            n = min(2000, per_user - done)
            texts = [sentence(rng, vocab) for _ in range(n)]
            vecs = fill_vectors(emb)(texts)
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
) -> tuple[float, float, float]:
    """p50 and p95 wall time, and the process's CPU time (all threads) per recall: on a
    shared machine the wall times mostly measure the other processes, the CPU time less."""
    rng = random.Random(7)
    times = []
    cpu = 0.0
    for i in range(n):
        q = " ".join(rng.choice(vocab) for _ in range(rng.randint(4, 10)))
        start, used = time.perf_counter(), time.process_time()
        await store.recall(user_id=users[i % len(users)], query=q, limit=10)
        times.append((time.perf_counter() - start) * 1000)
        if i >= 5:
            cpu += time.process_time() - used
    times = times[5:]  # warm-up
    return statistics.median(times), float(np.percentile(times, 95)), cpu / len(times) * 1000


async def speed(quick: bool, data: Path, backends: list[str], emb: Embedder | None = None) -> None:
    emb = emb or WordLlamaEmbedder()
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
            p50, p95, cpu = await time_recall(store, users, vocab)
            target = {
                "sqlite 100k, 1 user": "   (target p50 10 ms)",
                "sqlite 10k, 1 user": "   (target p95 50 ms)",
            }.get(label, "")
            times = f"p50 {p50:7.2f} ms   p95 {p95:7.2f} ms   cpu {cpu:6.2f} ms/recall"
            print(f"recall {label:16} {times}{target}")
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
