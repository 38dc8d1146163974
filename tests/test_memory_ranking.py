"""Recall ranking parts: dates named in the query, questions handing off to their answers,
neighbours of the best candidates; on the real store (SQLite, FTS5, WordLlama)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.test_memory_store import Env, make_env
from tools.memory.text import query_span

NOW = datetime(2026, 1, 10, 12, 0, tzinfo=UTC)


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    e, engine = await make_env(tmp_path)
    yield e
    await engine.dispose()  # type: ignore[attr-defined]


def day(y: int, m: int, d: int) -> tuple[datetime, datetime]:
    start = datetime(y, m, d, tzinfo=UTC)
    return start, start + timedelta(days=1)


@pytest.mark.parametrize(
    ("text", "span"),
    [
        ("What did I eat on 3 June, 2023?", day(2023, 6, 3)),
        ("what happened June 3rd 2023", day(2023, 6, 3)),
        ("and on Sep. 30, 2024?", day(2024, 9, 30)),
        ("notes from 2025-12-24", day(2025, 12, 24)),
        ("plans in December 2023", (datetime(2023, 12, 1, tzinfo=UTC), day(2024, 1, 1)[0])),
        ("what did I say yesterday", day(2026, 1, 9)),
        ("anything today?", day(2026, 1, 10)),
        # Without a year: the latest one that has begun (NOW is Saturday 10 January 2026).
        ("when did we go camping in June?", (day(2025, 6, 1)[0], day(2025, 7, 1)[0])),
        ("since early January", (day(2026, 1, 1)[0], day(2026, 2, 1)[0])),
        ("last January", (day(2025, 1, 1)[0], day(2025, 2, 1)[0])),
        ("on 3 June", day(2025, 6, 3)),
        ("January 9th", day(2026, 1, 9)),
        # Relative to now; the first time named counts.
        ("what did I do last week, not yesterday", (day(2025, 12, 29)[0], day(2026, 1, 5)[0])),
        ("two days ago", day(2026, 1, 8)),
        ("3 weeks ago", (day(2025, 12, 17)[0], day(2025, 12, 24)[0])),
        ("a few months ago", (day(2025, 10, 1)[0], day(2025, 11, 1)[0])),
        ("last month", (day(2025, 12, 1)[0], day(2026, 1, 1)[0])),
        ("our trip last year", (day(2025, 1, 1)[0], day(2026, 1, 1)[0])),
        ("last weekend", (day(2026, 1, 3)[0], day(2026, 1, 5)[0])),
        ("this weekend", (day(2026, 1, 10)[0], day(2026, 1, 12)[0])),
        ("what happened last Friday", day(2026, 1, 9)),
        ("on Sat", day(2026, 1, 3)),
        ("Monday was long", day(2026, 1, 5)),
    ],
)
def test_query_span_reads_the_dates_people_write(
    text: str, span: tuple[datetime, datetime]
) -> None:
    assert query_span(text, NOW) == span


@pytest.mark.parametrize(
    "text",
    [
        "what may I do",
        "May I?",
        "we march at dawn",
        "sat on the sofa",
        "on 31 February, 2023",
        "on 31 February",
        "2023-13-45",
        "in 2023",
        "",
    ],
)
def test_query_span_is_none_without_a_valid_date(text: str) -> None:
    assert query_span(text, NOW) is None


async def test_a_date_in_the_query_favours_memories_of_that_day(env: Env) -> None:
    env.clock.now = datetime(2023, 6, 3, 18, 0, tzinfo=UTC)
    june = await env.store.store(user_id=env.users[0], layer="long", content="Cooked a curry")
    env.clock.now = datetime(2023, 9, 1, 18, 0, tzinfo=UTC)
    sept = await env.store.store(
        user_id=env.users[0], layer="long", content="Cooked a curry with rice"
    )
    env.clock.now = NOW

    async def ids(query: str) -> list[int]:
        return [h.id for h in await env.store.recall(user_id=env.users[0], query=query)]

    assert (await ids("cooked curry rice"))[0] == sept.id
    assert (await ids("cooked curry rice on 3 June, 2023"))[0] == june.id
    assert (await ids("cooked curry rice in September 2023"))[0] == sept.id
    # A date no memory was made on changes nothing; a malformed one is just words.
    assert await ids("cooked curry rice on 3 June, 2021") == await ids("cooked curry rice")
    assert (await ids("cooked curry rice on 45 June, 2023"))[0] == sept.id
    env.store.weights = replace(env.store.weights, date_boost=1.0)
    assert (await ids("cooked curry rice on 3 June, 2023"))[0] == sept.id


async def test_a_question_hands_its_score_to_the_answer_after_it(env: Env) -> None:
    # Words only (the vector half weighted 0), so the expected order is certain.
    env.store.weights = replace(env.store.weights, vector=0.0)
    question = "Mel: How often do you and the kids work out at the gym together?"
    answer = "John: Three times a week, it keeps us on track."
    for text in ["Mel: The gym opened a new pool", question, answer, "Mel: Nice!"]:
        await env.store.store(
            user_id=env.users[0], layer="long", content=text, session_id=env.sessions[0]
        )
    query = "How often does John work out at the gym with the kids?"
    # Explicit strengths: the test is about the mechanism, not the tuned defaults (nor the
    # word-match stage, which matches the question's own words).
    env.store.weights = replace(
        env.store.weights, question_self=0.5, question_next=0.9, word_match=0.0
    )
    got = [h.content for h in await env.store.recall(user_id=env.users[0], query=query)]
    assert got.index(answer) < got.index(question)
    env.store.weights = replace(env.store.weights, question_self=1.0, question_next=0.0)
    got = [h.content for h in await env.store.recall(user_id=env.users[0], query=query)]
    assert got.index(question) < got.index(answer)


async def test_neighbours_of_the_best_candidates_find_what_all_would(env: Env) -> None:
    """Reading the neighbours of the best candidates only changes how a recall runs, not
    what it finds."""
    texts = [f"note {i}: {w} with the {x}" for i, (w, x) in enumerate(
        [("hiking", "dog"), ("coffee", "sister"), ("pottery", "kids"), ("chess", "father")] * 5
    )]  # fmt: skip
    for t in texts:
        await env.store.store(
            user_id=env.users[0], layer="long", content=t, session_id=env.sessions[0]
        )

    async def ids(limit: int = 5) -> list[int]:
        q = "pottery with the kids"
        return [h.id for h in await env.store.recall(user_id=env.users[0], query=q, limit=limit)]

    first = await ids()
    env.store.weights = replace(env.store.weights, spread_from=0)
    assert await ids() == first
    env.store.weights = replace(env.store.weights, spread_from=1)  # 2 x limit spread
    assert await ids(limit=1) == first[:1]
