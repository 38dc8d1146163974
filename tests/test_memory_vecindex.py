"""The in-process KNN's narrowing passes (sign bits, int8 head, exact rerank) against an
exact search, on random vectors and on WordLlama vectors of real LoCoMo turns."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pytest

from tools.memory import vecindex
from tools.memory.vecindex import UserVectors

LOCOMO = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "locomo_dev3.json"


def exact(mat: np.ndarray, alive: np.ndarray, q: np.ndarray, k: int) -> list[int]:
    sims = np.where(alive, mat @ q, -np.inf)
    return [int(i) + 1 for i in np.argsort(-sims)[:k]]


def filled(mat: np.ndarray) -> UserVectors:
    uv = UserVectors()
    for i, v in enumerate(mat):
        uv.add(i + 1, "long", 100, v)
    return uv


def match(uv: UserVectors, mat: np.ndarray, alive: np.ndarray, qs: np.ndarray, k: int) -> float:
    got = 0
    for q in qs:
        hits = uv.knn(q, k, None, 0)
        ids = [m for m, _ in hits]
        assert ids == sorted(ids, key=lambda m: -float(mat[m - 1] @ q))  # nearest first
        assert all(alive[m - 1] for m in ids)
        got += len(set(ids) & set(exact(mat, alive, q, k)))
    return got / (k * len(qs))


@pytest.fixture
def small_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Shortlists scaled to test sizes, so every pass narrows (as at 100k rows)."""
    monkeypatch.setattr(vecindex, "BITS_MIN", 400)
    monkeypatch.setattr(vecindex, "BITS_PER_K", 40)
    monkeypatch.setattr(vecindex, "SHORTLIST_MIN", 100)


def unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


@pytest.mark.usefixtures("small_passes")
def test_passes_find_the_exact_nearest_of_random_vectors() -> None:
    rng = np.random.default_rng(1)
    mat = unit(rng.normal(size=(3000, 96)))
    qs = unit(rng.normal(size=(20, 96)))
    uv = filled(mat)
    alive = np.ones(len(mat), dtype=bool)
    # Random directions are the worst case for sign bits (the 10 nearest are barely nearer
    # than the rest; 0.85 here): a floor, where real embeddings score >= 99.5% below.
    assert match(uv, mat, alive, qs, 10) >= 0.8
    # Distances are exact cosine distances, whatever pass found the row.
    (mid, dist), *_ = uv.knn(qs[0], 1, None, 0)
    assert dist == pytest.approx(1.0 - float(mat[mid - 1] @ qs[0]), abs=1e-5)


@pytest.mark.usefixtures("small_passes")
def test_passes_find_the_exact_nearest_of_real_turns() -> None:
    if not LOCOMO.exists():
        pytest.skip("LoCoMo data not in ../shared/data")
    from tools.memory.embeddings import WordLlamaEmbedder

    convs = json.loads(LOCOMO.read_text())
    turns = [
        t["text"]
        for c in convs
        for key, ts in c["conversation"].items()
        if key.startswith("session_") and isinstance(ts, list)
        for t in ts
    ]
    questions = [qa["question"] for qa in convs[0]["qa"][:40]]
    emb = WordLlamaEmbedder()
    mat = emb.embed_sync(turns).astype(np.float32)
    qs = emb.embed_sync(questions).astype(np.float32)
    alive = np.ones(len(mat), dtype=bool)
    assert match(filled(mat), mat, alive, qs, 10) >= 0.995


@pytest.mark.usefixtures("small_passes")
def test_updates_and_removes_reach_every_pass() -> None:
    rng = np.random.default_rng(2)
    mat = unit(rng.normal(size=(2000, 64)))
    uv = filled(mat)
    alive = np.ones(len(mat), dtype=bool)
    q = unit(rng.normal(size=(1, 64)))[0]
    # Rewrite a far row to the query itself: every pass must see the new values.
    far = exact(mat, alive, -q, 1)[0]
    mat[far - 1] = q
    uv.add(far, "long", 100, q)
    assert uv.knn(q, 1, None, 0)[0][0] == far
    # Removed rows never come back, and the rest still match the exact search.
    gone = exact(mat, alive, q, 5)
    uv.remove(gone)
    alive[[m - 1 for m in gone]] = False
    assert match(uv, mat, alive, np.stack([q]), 10) == 1.0
    # Rows added after a growth (capacity 1024 -> 2048 -> 4096) are searched too.
    extra = unit(rng.normal(size=(1, 64)))[0]
    uv.add(5000, "long", 100, extra)
    assert uv.knn(extra, 1, None, 0)[0][0] == 5000


async def test_a_memory_written_by_one_worker_is_recalled_by_the_other(tmp_path: Path) -> None:
    """Two workers (two engines, each with its own store, as two processes have) on one
    database: what one stores or forgets, the other's recall sees, even once it holds an
    in-process copy of the user's vectors (SQLite) — on PostgreSQL there is no copy."""
    from db.engine import create_engine, session_factory
    from db.migrate import upgrade
    from db.repos import core
    from tests.conftest import make_settings
    from tools.memory.embeddings import WordLlamaEmbedder
    from tools.memory.store import MemoryStore
    from tools.memory.vecindex import VectorCache

    settings = make_settings(tmp_path)
    engines = [create_engine(settings.db_url), create_engine(settings.db_url)]
    try:
        await upgrade(engines[0])
        one, two = (
            MemoryStore(
                session_factory(e),
                WordLlamaEmbedder(),
                settings,
                lambda: datetime(2026, 1, 10, 12, 0, tzinfo=UTC),
                vcache=VectorCache(min_rows=1),  # every user counts as big: the copy is used
            )
            for e in engines
        )
        async with session_factory(engines[0])() as s, s.begin():
            user = (await core.get_or_create_user(s, 1, "a", datetime.now(UTC))).id

        async def recalled(store: MemoryStore, query: str) -> list[str]:
            return [h.content for h in await store.recall(user_id=user, query=query, limit=1)]

        await one.store(user_id=user, layer="long", content="Plays the cello in a quartet")
        assert await recalled(two, "string instrument") == ["Plays the cello in a quartet"]
        kayak = await one.store(user_id=user, layer="long", content="Bought a red kayak")
        assert await recalled(two, "boat for paddling") == ["Bought a red kayak"]
        assert await one.forget(user_id=user, memory_id=kayak.id)
        assert await recalled(two, "boat for paddling") != ["Bought a red kayak"]
        # The second worker's own writes keep its copy in step too.
        await two.store(user_id=user, layer="long", content="Grows tomatoes on the balcony")
        assert await recalled(two, "vegetable garden") == ["Grows tomatoes on the balcony"]
        assert await recalled(one, "vegetable garden") == ["Grows tomatoes on the balcony"]
    finally:
        for e in engines:
            await e.dispose()
