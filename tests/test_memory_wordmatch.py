"""The word-match stage (tools/memory/rank.py): word-by-word similarity to the query
reorders the best fused candidates of a recall; on the real store (SQLite, WordLlama)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import ON_PG
from tests.test_memory_store import Env, make_env, put
from tools.memory.embeddings import WordLlamaEmbedder
from tools.memory.rank import RankWeights, WordVectors, content_words, matches, rescore
from tools.memory.store import MemoryStore

QUERY = "Which musical instruments does Melanie have?"
OTHERS = [
    "Melanie went to the grocery store on Monday",
    "Melanie said the weather was nice for a walk",
    "Melanie likes to play board games with friends",
    "Melanie has a meeting at work tomorrow",
    "Melanie cooked pasta for dinner yesterday",
]
ANSWER = "Melanie practises the violin and the guitar every evening"


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    e, engine = await make_env(tmp_path)
    yield e
    await engine.dispose()  # type: ignore[attr-defined]


@pytest.fixture
async def staged(tmp_path: Path) -> AsyncIterator[Env]:
    """Weights given: the stage runs on either database."""
    e, engine = await make_env(tmp_path)
    e.store = MemoryStore(e.sf, WordLlamaEmbedder(), e.settings, e.clock, weights=RankWeights())
    yield e
    await engine.dispose()  # type: ignore[attr-defined]


async def test_a_memory_naming_what_the_question_means_outranks_shared_words(env: Env) -> None:
    ids = [await put(env, t) for t in OTHERS]
    answer = await put(env, ANSWER)
    assert env.store.weights.word_match > 0  # on by default

    async def first() -> int:
        return (await env.store.recall(user_id=env.users[0], query=QUERY))[0].id

    if ON_PG:  # no weights given: the stage does not run on PostgreSQL (store.py)
        assert await first() in ids
        return
    # Only the name is a shared word: without the stage another memory wins, with it the
    # violin and the guitar do.
    env.store.weights = replace(env.store.weights, word_match=0.0)
    assert await first() in ids
    env.store.weights = replace(env.store.weights, word_match=RankWeights().word_match)
    assert await first() == answer


@pytest.mark.db
async def test_a_zero_weight_turns_the_stage_off(tmp_path: Path) -> None:
    e, engine = await make_env(tmp_path)
    off = replace(RankWeights(), word_match=0.0)
    e.store = MemoryStore(e.sf, WordLlamaEmbedder(), e.settings, e.clock, weights=off)
    try:
        assert e.store.weights.word_match == 0.0
        ids = [await put(e, t) for t in OTHERS]
        await put(e, ANSWER)
        hits = await e.store.recall(user_id=e.users[0], query=QUERY)
        assert hits[0].id in ids
    finally:
        await engine.dispose()  # type: ignore[attr-defined]


@pytest.mark.db
async def test_failing_word_vectors_leave_the_fused_order(staged: Env) -> None:
    env = staged
    for t in OTHERS:
        await put(env, t)
    await put(env, ANSWER)
    fused = replace(env.store.weights, word_match=0.0)
    env.store.weights = fused
    expected = [h.id for h in await env.store.recall(user_id=env.users[0], query=QUERY)]

    async def broken(words: list[str]) -> np.ndarray:
        raise RuntimeError("no vectors today")

    env.store.word_vectors = WordVectors(broken)
    env.store.weights = replace(fused, word_match=1.0)
    hits = await env.store.recall(user_id=env.users[0], query=QUERY)
    assert [h.id for h in hits] == expected
    assert hits[0].relevance == 1.0


@pytest.mark.db
async def test_only_the_best_candidates_are_reordered_and_the_rest_follow(staged: Env) -> None:
    env = staged
    extra = ["Melanie painted a sunrise by the lake", "Melanie reads novels on the train"]
    for t in OTHERS + extra:
        await put(env, t)
    answer = await put(env, ANSWER)
    env.store.weights = replace(env.store.weights, word_match=5.0, word_match_top=3)
    hits = await env.store.recall(user_id=env.users[0], query=QUERY, limit=8)
    assert len(hits) == 8
    relevance = [h.relevance or 0.0 for h in hits]
    assert relevance == sorted(relevance, reverse=True) and relevance[0] == 1.0
    env.store.weights = replace(env.store.weights, word_match_top=50)
    assert (await env.store.recall(user_id=env.users[0], query=QUERY, limit=8))[0].id == answer


def test_content_words_keep_the_words_that_carry_meaning() -> None:
    assert content_words("Which of the 3 kids has a dog? The kids, I mean") == [
        "kids", "dog", "mean"
    ]  # fmt: skip


async def test_matches_score_meaning_word_by_word() -> None:
    vectors = WordVectors(WordLlamaEmbedder().embed)
    got = await matches(
        vectors,
        "What pets does the family keep?",
        ["Our dog and two cats sleep inside", "The train was late again", "?!"],
    )
    assert got[0] > got[1] > 0 and got[2] == 0
    assert not (await matches(vectors, "what is it?", ["Our dog"])).any()


def test_rescore_adds_the_weighted_match_to_the_relative_score() -> None:
    ranked = [(1, 2.0), (2, 1.0), (3, 0.5)]
    match = np.array([0.2, 0.2, 0.6])
    assert [m for m, _ in rescore(ranked, match, 2.0)] == [3, 1, 2]
    assert [m for m, _ in rescore(ranked, match, 1.2)] == [1, 3, 2]
    assert [m for m, _ in rescore(ranked, match, 0.4)] == [1, 2, 3]
    assert rescore(ranked, match, 1.0)[0] == (1, pytest.approx(1.2))
    # Equal matches change nothing but a constant: the order stays.
    assert [m for m, _ in rescore(ranked, np.array([0.3, 0.3, 0.3]), 5.0)] == [1, 2, 3]
    assert rescore([], np.zeros(0), 1.0) == []
    # Only the first len(match) are reordered; the rest follow, relative to the best.
    assert rescore(ranked, np.array([0.0, 1.0]), 1.0) == [
        (2, pytest.approx(1.5)), (1, pytest.approx(1.0)), (3, pytest.approx(0.25))
    ]  # fmt: skip


async def test_a_full_cache_keeps_the_words_the_call_reads_back() -> None:
    async def embed(ws: list[str]) -> np.ndarray:
        return np.ones((len(ws), 4), dtype=np.float32)

    vectors = WordVectors(embed, limit=4)
    await vectors.of(["violin", "guitar", "piano", "drums"])
    # Full: the oldest word is wanted again beside two new ones, and must still be there.
    await vectors.of(["violin", "cello", "flute"])
    assert vectors.matrix(["violin", "cello", "flute"]).shape == (3, 4)
    assert len(vectors.seen) <= 4
