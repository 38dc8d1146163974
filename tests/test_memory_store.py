"""MemoryStore on a real SQLite file with sqlite-vec, FTS5 and the real WordLlama embedder."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import text

from bot.config import Settings
from bot.sessions.repo import close_session
from db.engine import SessionFactory, create_engine, session_factory
from db.migrate import upgrade
from db.repos import core
from tests.conftest import make_settings, sqlite_only
from tools.memory.embeddings import WordLlamaEmbedder
from tools.memory.store import MemoryStore


@dataclass
class Clock:
    now: datetime = field(default_factory=lambda: datetime(2026, 1, 10, 12, 0, tzinfo=UTC))

    def __call__(self) -> datetime:
        return self.now


@dataclass
class Env:
    settings: Settings
    sf: SessionFactory
    clock: Clock
    store: MemoryStore
    users: list[int]
    sessions: list[int]


async def make_env(tmp_path: Path, **extra: object) -> tuple[Env, object]:
    settings = make_settings(tmp_path, **extra)
    engine = create_engine(settings.db_url)
    await upgrade(engine)
    sf = session_factory(engine)
    clock = Clock()
    users, sessions = [], []
    async with sf() as s, s.begin():
        for tg in (1, 2):
            u = await core.get_or_create_user(s, tg, f"user{tg}", clock())
            sess = await core.create_session(s, u.id, None, clock())
            users.append(u.id)
            sessions.append(sess.id)
    store = MemoryStore(sf, WordLlamaEmbedder(), settings, clock)
    return Env(settings, sf, clock, store, users, sessions), engine


@pytest.fixture
async def env(tmp_path: Path) -> AsyncIterator[Env]:
    e, engine = await make_env(tmp_path)
    yield e
    await engine.dispose()  # type: ignore[attr-defined]


async def put(env: Env, content: str, layer: str = "long", user: int = 0, **kw: object) -> int:
    res = await env.store.store(
        user_id=env.users[user],
        layer=layer,
        content=content,
        session_id=env.sessions[user],
        **kw,  # type: ignore[arg-type]
    )
    return res.id


async def contents(env: Env, query: str, user: int = 0, **kw: object) -> list[str]:
    hits = await env.store.recall(user_id=env.users[user], query=query, **kw)  # type: ignore[arg-type]
    return [h.content for h in hits]


async def test_store_and_recall_by_meaning_and_words(env: Env) -> None:
    await put(env, "Has a golden retriever named Biscuit", category="fact")
    await put(env, "Works as a nurse at the city hospital", category="fact")
    await put(env, "Prefers tea over coffee", category="preference")
    assert (await contents(env, "what is the name of my dog?"))[0].startswith("Has a golden")
    assert (await contents(env, "hospital job"))[0].startswith("Works as a nurse")
    hits = await env.store.recall(user_id=env.users[0], query="tea", limit=1)
    assert len(hits) == 1 and hits[0].category == "preference" and hits[0].relevance == 1.0
    assert hits[0].session_name and hits[0].source()


async def test_users_never_see_each_other(env: Env) -> None:
    await put(env, "Secret: the safe code is 4711", user=0)
    await put(env, "Likes hiking in the Alps", user=1)
    assert await contents(env, "safe code 4711", user=1) == ["Likes hiking in the Alps"]
    assert (await env.store.page(user_id=env.users[1])).total == 1
    mine = await put(env, "Drives a red bicycle", user=0)
    assert not await env.store.forget(user_id=env.users[1], memory_id=mine)
    assert await env.store.get(user_id=env.users[0], memory_id=mine) is not None
    assert await env.store.get(user_id=env.users[1], memory_id=mine) is None


async def test_near_duplicate_updates_instead_of_adding(env: Env) -> None:
    first = await env.store.store(user_id=env.users[0], layer="long", content="Lives in Berlin")
    env.clock.now += timedelta(hours=1)
    again = await env.store.store(
        user_id=env.users[0], layer="long", content="lives in  Berlin.", certainty=0.5
    )
    assert again.updated and again.id == first.id
    other = await env.store.store(user_id=env.users[0], layer="long", content="Lives in Munich")
    assert not other.updated and other.id != first.id
    # The same text in another layer is another memory.
    mid = await env.store.store(user_id=env.users[0], layer="mid", content="Lives in Berlin")
    assert not mid.updated
    page = await env.store.page(user_id=env.users[0], layer="long")
    assert page.total == 2
    updated = await env.store.get(user_id=env.users[0], memory_id=first.id)
    assert (
        updated is not None and updated.content == "lives in Berlin." and updated.certainty == 0.5
    )
    assert updated.updated_at == env.clock.now
    assert len(await contents(env, "Berlin", layers=["long"])) == 2


async def test_layer_lifetimes_and_sweep(env: Env) -> None:
    await put(env, "Permanent fact about chess", layer="long")
    await put(env, "Goal: run a marathon with chess friends", layer="mid")
    await put(env, "Recently watched a chess movie", layer="short")
    await put(env, "Talking about chess openings now", layer="session")
    env.clock.now += timedelta(days=15)  # short (14 days) is gone
    assert sorted(await contents(env, "chess")) == sorted(
        [
            "Permanent fact about chess",
            "Goal: run a marathon with chess friends",
            "Talking about chess openings now",
        ]
    )
    env.clock.now += timedelta(days=80)  # mid (90 days) is gone too
    assert len(await contents(env, "chess")) == 2
    assert await env.store.sweep() == 2
    async with env.sf() as s:
        left = (await s.execute(text("select count(*) from memory_vec"))).scalar_one()
        fts = (await s.execute(text("select count(*) from memory_fts"))).scalar_one()
    assert left == 2 and fts == 2


async def test_session_memories_end_with_their_session(env: Env) -> None:
    await put(env, "We are planning the trip to Lisbon", layer="session")
    await put(env, "Travelled to Lisbon in 2019", layer="long")
    assert len(await contents(env, "Lisbon trip")) == 2
    # Another session of the same user does not see it when it names its session.
    async with env.sf() as s, s.begin():
        await close_session(s, env.sessions[0], env.clock())
        new = await core.create_session(s, env.users[0], None, env.clock())
    assert await contents(env, "Lisbon trip", session_id=new.id) == ["Travelled to Lisbon in 2019"]
    assert await contents(env, "Lisbon trip") == ["Travelled to Lisbon in 2019"]  # ended
    assert await env.store.sweep() == 1
    await env.store.store(
        user_id=env.users[0], layer="session", content="Booking hotels", session_id=new.id
    )
    assert await env.store.clear_session(user_id=env.users[0], session_id=new.id) == 1
    assert await env.store.clear_session(user_id=env.users[1], session_id=new.id) == 0


async def test_bad_input_raises_value_errors(env: Env) -> None:
    with pytest.raises(ValueError, match="layer"):
        await env.store.store(user_id=env.users[0], layer="forever", content="x")
    with pytest.raises(ValueError, match="empty"):
        await env.store.store(user_id=env.users[0], layer="long", content="  \n ")
    with pytest.raises(ValueError, match="session"):
        await env.store.store(user_id=env.users[0], layer="session", content="x")
    assert await env.store.recall(user_id=env.users[0], query="   ") == []
    # FTS5 syntax in a query is just words.
    await put(env, "Uses vim with NEAR zero plugins")
    assert await contents(env, 'vim" OR NEAR( * AND "') == ["Uses vim with NEAR zero plugins"]


@pytest.mark.db
async def test_restart_keeps_memories(tmp_path: Path) -> None:
    e, engine = await make_env(tmp_path)
    mid = await put(e, "Birthday is on the 3rd of May")
    await engine.dispose()  # type: ignore[attr-defined]
    engine2 = create_engine(e.settings.db_url)
    store2 = MemoryStore(session_factory(engine2), WordLlamaEmbedder(), e.settings, e.clock)
    hits = await store2.recall(user_id=e.users[0], query="when is my birthday")
    assert [h.id for h in hits] == [mid]
    assert (await store2.index_status()).ok
    await engine2.dispose()


async def test_changed_embedder_degrades_to_words_then_reindex(env: Env) -> None:
    await put(env, "Has a golden retriever named Biscuit")

    class Other(WordLlamaEmbedder):
        """The real model cut to its first 128 dimensions (it is a Matryoshka model)."""

        def __init__(self) -> None:
            super().__init__()
            self.name, self.dim = "wordllama:l2_supercat:128", 128

        def embed_sync(self, texts: list[str]) -> np.ndarray:
            v = super().embed_sync(texts)[:, :128]
            return v / np.linalg.norm(v, axis=1, keepdims=True)

    other = MemoryStore(env.sf, Other(), env.settings, env.clock)
    status = await other.index_status()
    assert not status.ok and "reindex" in status.detail
    # Words still work; meaning alone does not crash, it just finds nothing by meaning.
    assert await other.recall(user_id=env.users[0], query="Biscuit") != []
    assert (await other.store(user_id=env.users[0], layer="long", content="Owns a cat")).id
    assert await other.reindex() == 2
    assert (await other.index_status()).ok
    hits = await other.recall(user_id=env.users[0], query="which pets", limit=2)
    assert len(hits) == 2


HYBRID_FACTS = [
    "Has a dog called Rex",
    "Pet insurance renewal is due in March",
    "Seeing Dr. Okafor for a checkup on Tuesday",
    "Booked an appointment to repair the car brakes",
    "Works at a bakery downtown",
    "Sister Anna lives in Toronto",
    "Allergic to peanuts",
    "Drives an old Volvo",
    "Plays the cello in a quartet",
    "Colleague Priya loves the colour green",
    "Brother Tom is a fan of bright blue colours",
    "Mother likes pastel colours",
    "Notes from the team meeting: budget approved, new hires in spring, office move "
    "delayed, Kowalski deal signed, parking rules unchanged",
    "Signed the lease contract for the new flat",
    "Team meeting notes: budget cut, hiring frozen, Novak deal postponed, new coffee machine",
    "Meeting notes from Friday: Brennan deal on hold, office plants, quarterly numbers good",
    "Notes of the board meeting: Lindqvist deal cancelled, new logo, travel budget doubled",
    "The door code of the cellar storage room is 4711",
    "The door code of the garage is 9052",
    "The door code of the office is 1234",
    "Flight LH 2231 to Lisbon leaves at 7:40",
    "Flight BA 118 to London leaves at 9:15",
]
# (query, the memory that answers it): paraphrases that share no word with the answer, and
# questions whose answer shares a rare word with them among look-alikes.
HYBRID_QUERIES = [
    ("my animals", "Has a dog called Rex"),
    ("medical stuff", "Seeing Dr. Okafor for a checkup on Tuesday"),
    ("food allergy", "Allergic to peanuts"),
    ("what instrument", "Plays the cello in a quartet"),
    ("what colour does Tom like", "Brother Tom is a fan of bright blue colours"),
    ("Priya colour", "Colleague Priya loves the colour green"),
    ("when is the renewal due", "Pet insurance renewal is due in March"),
    ("was the Kowalski deal signed", HYBRID_FACTS[12]),
    ("lease contract", "Signed the lease contract for the new flat"),
    ("Brennan deal", HYBRID_FACTS[15]),
    ("what happened with Lindqvist", HYBRID_FACTS[16]),
    ("which door has the code 4711", HYBRID_FACTS[17]),
    ("where does flight 118 go", HYBRID_FACTS[21]),
    ("when does LH 2231 leave", HYBRID_FACTS[20]),
]


async def test_hybrid_beats_either_half(env: Env) -> None:
    for f in HYBRID_FACTS:
        await put(env, f)

    base = env.store.weights

    async def mrr(bm25: bool, vectors: bool) -> float:
        # A half weighted 0 is not searched.
        env.store.weights = replace(base, bm25=base.bm25 * bm25, vector=base.vector * vectors)
        total = 0.0
        for query, answer in HYBRID_QUERIES:
            got = await contents(env, query, limit=5)
            total += 1 / (got.index(answer) + 1) if answer in got else 0.0
        return total / len(HYBRID_QUERIES)

    hybrid, words_only, meaning_only = (
        await mrr(True, True),
        await mrr(True, False),
        await mrr(False, True),
    )
    assert hybrid > words_only and hybrid > meaning_only


def test_prune_keeps_the_rarest_words_within_budget() -> None:
    from tools.memory.text import prune

    freqs = [("coffee", 900), ("zeppelin", 2), ("morning", 400), ("rare", 5)]
    assert prune(freqs, 10) == ["zeppelin", "rare"]  # original order kept
    assert prune(freqs, 500) == ["zeppelin", "morning", "rare"]
    assert prune(freqs, 10_000) == ["coffee", "zeppelin", "morning", "rare"]
    # Only common words: the rarest still goes, so the query is never empty.
    assert prune([("coffee", 900), ("morning", 400)], 10) == ["morning"]
    assert prune([], 10) == []


async def test_doc_freqs_stem_like_the_index(env: Env) -> None:
    from tools.memory import repo

    for i in range(3):
        await put(env, f"Went running with the club, lap {i} of the park")
    await put(env, "Runs a bakery", user=1)
    async with env.sf() as s:
        freqs = await repo.doc_freqs(s, ["running", "runs", "bakery", "zeppelin"])
    assert freqs["running"] == ("run", 4)  # all users: BM25's IDF counts them too
    assert freqs["runs"] == ("run", 4)
    assert freqs["bakery"] == ("bakeri", 1)
    assert freqs["zeppelin"][1] == 0


async def test_pruned_bm25_finds_rare_words_and_answers_common_ones(env: Env) -> None:
    env.store.weights = replace(env.store.weights, vector=0.0)  # the BM25 half alone
    env.store.words.budget = 3

    async def put_alone(content: str, user: int = 0) -> None:
        # No session: neighbour spreading stays out of this test.
        await env.store.store(user_id=env.users[user], layer="long", content=content)

    for i in range(12):
        await put_alone(f"Coffee in the morning at cafe number {i}")
    rare = "Morning coffee on the zeppelin flight"
    await put_alone(rare)
    await put_alone("Coffee with a zeppelin pilot", user=1)
    # "coffee" and "morning" are over budget and dropped; "zeppelin" finds the answer.
    assert await contents(env, "coffee morning zeppelin", limit=3) == [rare]
    # Only common words: the rarest of them is kept, the query still answers.
    found = await contents(env, "coffee morning", limit=20)
    assert len(found) == 13 and rare in found
    # User 0 owns most of the index (unscoped MATCH), yet never sees user 1's memory,
    # and gets all of its few matches (scoped retry).
    assert await contents(env, "zeppelin pilot", limit=10) == [rare]
    assert await contents(env, "zeppelin", user=1) == ["Coffee with a zeppelin pilot"]


async def test_word_counts_refresh_after_writes(env: Env) -> None:
    from tools.memory.text import REFRESH_WRITES

    env.store.weights = replace(env.store.weights, vector=0.0)
    env.store.words.budget = 1  # below two words' counts even in a store of one memory
    await put(env, "Tea with lemon")
    await contents(env, "tea lemon")
    assert env.store.words.freqs["tea"][1] == 1
    for i in range(REFRESH_WRITES):
        await put(env, f"Tea number {i} brewed")
    await contents(env, "tea lemon")
    assert env.store.words.freqs["tea"][1] == REFRESH_WRITES + 1
    # "tea" is now over budget: "lemon" alone still finds its memory first.
    assert (await contents(env, "tea lemon", limit=1)) == ["Tea with lemon"]


async def test_known_says_whether_any_memory_is_alive_and_reads_the_long_term_ones(
    env: Env,
) -> None:
    """Auto-recall's first read for every message: whether the user has a live memory
    (expired and other users' memories never count) and their long-term ones, most certain
    and most recent first, at most `limit` of them."""
    assert await env.store.known(user_id=env.users[0], limit=3) == (False, [])
    await put(env, "Recently watched a film about sailing", layer="short")
    other = await put(env, "Another user's fact about sailing", layer="mid", user=1)
    assert await env.store.known(user_id=env.users[0], limit=3) == (True, [])
    ids = []
    for i in range(4):
        ids.append(await put(env, f"Fact number {i} about sailing boats {i}", certainty=0.9))
        env.clock.now += timedelta(minutes=1)
    surest = await put(env, "Sails every summer", certainty=1.0)
    alive, longs = await env.store.known(user_id=env.users[0], limit=3)
    assert alive and [h.id for h in longs] == [surest, ids[3], ids[2]]
    env.clock.now += timedelta(days=15)  # the short memory expired: the long ones stay
    alive, longs = await env.store.known(user_id=env.users[0], limit=10)
    assert alive and [h.id for h in longs] == [surest, *reversed(ids)]
    assert await env.store.known(user_id=env.users[1], limit=3) == (True, [])
    await env.store.forget(user_id=env.users[1], memory_id=other)
    assert await env.store.known(user_id=env.users[1], limit=3) == (False, [])


async def test_auto_recall_reads_a_bounded_number_of_rows(env: Env) -> None:
    """The provider's section is what the counted page gave (all memories when they fit in
    one read, the long-term query past that, expired ones never), and no read of it counts
    or orders all of a user's memories."""
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    from tools.memory.recall_context import LONG_LIMIT, build_provider

    provide = build_provider(env.store, 2000)

    class Ctx:
        has_memories = None
        shared_chat = False
        chat = None
        user_id = env.users[0]
        session_id = env.sessions[0]

    async def section(text: str) -> str | None:
        return await provide(Ctx(), text)  # type: ignore[arg-type]

    async def by_page(text: str) -> list[str]:
        """The long-term memories a counted page lists (there are fewer than LONG_LIMIT)."""
        page = await env.store.page(user_id=env.users[0], layer="long", limit=LONG_LIMIT)
        assert page.total < LONG_LIMIT
        return [f"[#{h.id}]" for h in page.items]

    def lines(out: str | None) -> list[str]:
        return [] if out is None else out.splitlines()[1:]

    statements: list[str] = []

    def seen(conn: object, cursor: object, statement: str, *rest: object) -> None:
        statements.append(" ".join(statement.split()).lower())

    assert await section("anything about boats?") is None  # no memories: nothing to say
    for i in range(6):
        await put(env, f"Owns boat number {i}", certainty=0.5 + i / 20)
        env.clock.now += timedelta(minutes=1)
    await put(env, "Recently rented a boat in Kiel", layer="short")
    env.clock.now += timedelta(days=15)  # that one expired: never offered
    await section("boats")  # the store's one-time counts (BM25's word pruning) read here
    event.listen(Engine, "before_cursor_execute", seen)
    try:
        few = lines(await section("which boat do I own?"))
        assert not any("count(" in s and "from memories" in s for s in statements)
        for i in range(LONG_LIMIT + 5):  # past one read: the long-term query runs
            await put(env, f"Week {i}: sailed to island {i}", layer="mid")
        many = lines(await section("which boat do I own?"))
    finally:
        event.remove(Engine, "before_cursor_execute", seen)
    assert not any("Kiel" in line for line in few + many)

    def longs(section_lines: list[str]) -> set[str]:
        return {line.split()[1] for line in section_lines if "(long" in line}

    assert len(longs(few)) == 6 and longs(few) == set(await by_page("boat"))
    assert longs(many) == set(await by_page("boat"))
    assert len(many) > len(few)  # the relevant mid-term ones joined them
    reads = [s for s in statements if "order by memories.certainty desc" in s]
    assert len(reads) == 2 and not any("count(" in s and "from memories" in s for s in statements)


@sqlite_only  # reads SQLite's query plan
async def test_per_message_read_stops_at_its_limits(env: Env) -> None:
    """Auto-recall's one read of rows for every message walks indexes to its limits: no
    sort of all of a user's memories (SQLite's plan has no temp B-tree), so it costs the
    same with 30 memories or 30,000."""
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    for i in range(3):
        await put(env, f"Long-term fact {i}", certainty=0.5)
    captured: list[tuple[str, object]] = []

    def seen(conn: object, cursor: object, statement: str, params: object, *rest: object) -> None:
        if "FROM memories" in statement:
            captured.append((statement, params))

    event.listen(Engine, "before_cursor_execute", seen)
    try:
        alive, long_term = await env.store.known(user_id=env.users[0], limit=20)
    finally:
        event.remove(Engine, "before_cursor_execute", seen)
    assert alive and len(long_term) == 3 and len(captured) == 1
    async with env.sf() as s:
        raw = await (await s.connection()).get_raw_connection()
        statement, params = captured[0]
        cursor = await raw.driver_connection.execute(  # type: ignore[union-attr]
            "EXPLAIN QUERY PLAN " + statement, params
        )
        plan = " / ".join(str(row[3]) for row in await cursor.fetchall())
    assert "TEMP B-TREE" not in plan, plan
    assert plan.count("SEARCH memories USING INDEX") == 2, plan


@sqlite_only  # SQLite's one statement (PostgreSQL's searches are its own functions)
async def test_a_recall_searches_words_and_vectors_in_one_statement(env: Env) -> None:
    """The KNN searches (one, or one a wanted layer) and the BM25 read go to the database
    as one statement, and find what each finds alone."""
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    await put(env, "Plays the violin in an orchestra")
    await put(env, "Learning the cello on weekends", layer="mid")
    await put(env, "Has a dog named Rex")
    statements: list[str] = []

    def seen(conn: object, cursor: object, statement: str, *rest: object) -> None:
        if "memory_vec" in statement or "memory_fts" in statement:
            statements.append(statement)

    event.listen(Engine, "before_cursor_execute", seen)
    try:
        every = await contents(env, "which instrument does the violinist play?")
        long_mid = await contents(env, "violin cello", layers=["long", "mid"])
    finally:
        event.remove(Engine, "before_cursor_execute", seen)
    assert every[0] == "Plays the violin in an orchestra"
    assert set(long_mid[:2]) == {
        "Plays the violin in an orchestra",
        "Learning the cello on weekends",
    }
    searches = [x for x in statements if "memory_vec" in x]
    assert len(searches) == 2 and all("memory_fts MATCH" in x for x in searches)
    assert searches[1].count("embedding MATCH") == 2  # a KNN search a wanted layer


@sqlite_only  # SQLite's BM25 temp tables (PostgreSQL ranks with ts_rank)
async def test_word_counts_make_their_temp_tables_once_per_connection(env: Env) -> None:
    """BM25's word pruning reads document counts through temp tables: made at a connection's
    first recall, not with three statements at every one, then two statements a count (the
    words written, their counts read); the counts are the same."""
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    from tools.memory import repo

    await put(env, "Plays the violin in an orchestra")
    await put(env, "Runs along the river before work")
    statements: list[str] = []

    def seen(conn: object, cursor: object, statement: str, *rest: object) -> None:
        statements.append(statement)

    event.listen(Engine, "before_cursor_execute", seen)
    try:
        counts = []
        for _ in range(3):
            statements.clear()
            async with env.sf() as s:
                counts.append(await repo.doc_freqs(s, ["running", "violins", "piano"]))
            made = [x for x in statements if x.startswith("CREATE VIRTUAL TABLE")]
            assert len(made) == (3 if len(counts) == 1 else 0)
            # The words written over the last query's, then read: no DELETE first.
            assert len(statements) == len(made) + 2
        async with env.sf() as s:  # fewer words than the last query: its others not read
            fewer = [await repo.doc_freqs(s, [w]) for w in ("piano", "violins")]
    finally:
        event.remove(Engine, "before_cursor_execute", seen)
    assert counts[0] == counts[1] == counts[2]
    assert counts[0] == {"running": ("run", 1), "violins": ("violin", 1), "piano": ("piano", 0)}
    assert fewer == [{"piano": ("piano", 0)}, {"violins": ("violin", 1)}]
    assert (await contents(env, "who plays violin?"))[0] == "Plays the violin in an orchestra"


@sqlite_only  # the owner-scoped FTS5 MATCH (PostgreSQL filters a plain column)
async def test_an_unscoped_bm25_read_that_held_every_match_is_not_asked_again(env: Env) -> None:
    """A user who owns most of the index is searched without the owner term first: when
    that read took in all the index's matches, its rows are the user's whole answer (one
    statement, not a second scoped one); when the index's best matches were others', it
    says so and the scoped read finds the user's."""
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    from tools.memory import repo

    env.store.weights = replace(env.store.weights, vector=0.0)  # the BM25 half alone
    for i in range(4):
        await put(env, f"Zeppelin flight number {i}", user=1)
    await put(env, "Once read a long history of airships, one a zeppelin, over a whole winter")
    for i in range(5):
        await put(env, f"Grows tomatoes on balcony {i}")
    now = env.clock()
    async with env.sf() as s:
        # k=1 reads the index's best 4: all user 1's, so user 0's may be further down.
        assert await repo.bm25(s, env.users[0], "zeppelin", 1, None, now, scoped=False) == (
            [],
            False,
        )
        found, complete = await repo.bm25(s, env.users[0], "zeppelin", 1, None, now)
        assert complete and len(found) == 1
        # k=2 reads up to 8: all 5 matches, so user 0's one is the whole answer.
        again, complete = await repo.bm25(s, env.users[0], "zeppelin", 2, None, now, scoped=False)
        assert complete and again == found
    statements: list[str] = []

    def seen(conn: object, cursor: object, statement: str, *rest: object) -> None:
        statements.append(statement)

    event.listen(Engine, "before_cursor_execute", seen)
    try:
        found_first = (await contents(env, "zeppelin"))[0]
        assert found_first.startswith("Once read a long history of airships")
    finally:
        event.remove(Engine, "before_cursor_execute", seen)
    assert len([x for x in statements if "bm25(memory_fts" in x]) == 1


async def test_a_store_too_small_to_prune_reads_no_word_counts(env: Env) -> None:
    """No word is in more memories than there are: while every query word's share of the
    budget holds them all, the counts are not read (no statement), and the words all stay."""
    env.store.weights = replace(env.store.weights, vector=0.0)
    env.store.words.budget = 4
    await put(env, "Tea with lemon")
    await put(env, "Coffee with milk")
    await contents(env, "tea lemon")  # 2 words x 2 memories: within 4
    assert env.store.words.freqs == {}
    await put(env, "Tea with honey")
    await contents(env, "tea lemon")  # 2 x 3 memories: over 4, so counted, and pruned
    assert env.store.words.freqs["tea"][1] == 2
    assert (await contents(env, "tea lemon", limit=1)) == ["Tea with lemon"]
