"""Query expansion (tools/memory/expand.py): the query's words bring their nearest words
among the user's own, on the real store (SQLite, FTS5, WordLlama)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path

import pytest

from tests.test_memory_store import Env, make_env

FACTS = [
    "Sam bought new drums last spring",
    "Coffee with Anna on Friday",
    "Dentist appointment next week",
]
GUITAR = "Sam keeps an old guitar under the bed"


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    e, engine = await make_env(tmp_path)
    for text in FACTS:
        await e.store.store(user_id=e.users[0], layer="long", content=text)
    yield e
    await engine.dispose()  # type: ignore[attr-defined]


async def found(env: Env, query: str, user: int = 0) -> list[str]:
    return [h.content for h in await env.store.recall(user_id=env.users[user], query=query)]


async def test_a_word_the_memories_lack_finds_them_through_its_neighbours(env: Env) -> None:
    env.store.use_vectors = False  # words only: nothing else can bridge "instruments"
    assert await found(env, "which instruments") == []  # expansion is off by default
    env.store.weights = replace(env.store.weights, expand=0.2)
    assert await found(env, "which instruments") == [FACTS[0]]


async def test_memories_stored_later_join_the_vocabulary(env: Env) -> None:
    env.store.use_vectors = False
    env.store.weights = replace(env.store.weights, expand=0.2)
    await found(env, "which instruments")  # the vocabulary is loaded now
    await env.store.store(user_id=env.users[0], layer="long", content=GUITAR)
    assert set(await found(env, "which instruments")) == {FACTS[0], GUITAR}


async def test_only_the_users_own_words_expand(env: Env) -> None:
    env.store.use_vectors = False
    env.store.weights = replace(env.store.weights, expand=0.2)
    await env.store.store(user_id=env.users[1], layer="long", content="Bea plays the drums")
    assert await found(env, "which instruments", user=1) == ["Bea plays the drums"]


async def test_each_word_brings_its_nearest_few_above_the_floor(env: Env) -> None:
    async def texts() -> list[str]:
        return [*FACTS, GUITAR]

    uw = await env.store.expander.load(env.users[0], texts)
    assert await env.store.expander.expand(uw, ["instruments"], 1, 0.4) == ["drums"]
    assert await env.store.expander.expand(uw, ["instruments"], 3, 0.9) == []
    near = await env.store.expander.expand(uw, ["drums", "instruments"], 3, 0.4)
    assert "drums" not in near and "guitar" in near  # never a word of the query itself
