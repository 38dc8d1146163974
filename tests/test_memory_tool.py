"""The memory tool through the real agent loop, the auto-recall prompt section, and doctor."""

from __future__ import annotations

import json

from sqlalchemy import select

from bot.agent.runner import Incoming
from bot.app import App
from bot.sessions.background import ARCHIVE
from tests.fakes.openai_server import Calls, FakeOpenAI, Text
from tests.prompt_blocks import context_of
from tools.memory.models import Memory
from tools.memory.store import MEMORY


def tool_results(fake_llm: FakeOpenAI, count: int | None = None) -> list[str]:
    """The tool results the model saw in its last request (the last `count` of them)."""
    out = [m["content"] for m in fake_llm.requests[-1]["messages"] if m["role"] == "tool"]
    return out[-count:] if count else out


async def test_store_recall_list_forget(app: App, fake_llm: FakeOpenAI) -> None:
    # One call a round: calls of one round run at once, and which of two stores of one
    # fact comes first (and so which is "updated") would be a race.
    berlin = {"action": "store", "layer": "long", "content": "Lives in Berlin",
              "category": "fact", "certainty": 0.9}  # fmt: skip
    marathon = {"action": "store", "layer": "mid", "content": "Training for a marathon in April",
                "category": "goal"}  # fmt: skip
    again = {"action": "store", "layer": "long", "content": "lives in Berlin"}
    fake_llm.add(
        Calls([("memory", berlin)]),
        Calls([("memory", marathon)]),
        Calls([("memory", again)]),
        Text("noted"),
    )
    said = "I live in Berlin, and I am training for a marathon in April."
    reply = await app.agent.handle(Incoming(said, telegram_user_id=5))
    assert reply.text == "noted"
    stored = tool_results(fake_llm)
    assert stored[0] == "stored #1" and stored[1] == "stored #2" and stored[2] == "updated #1"

    fake_llm.add(
        Calls(
            [
                ("memory", {"action": "recall", "query": "which city do I live in"}),
                ("memory", {"action": "list", "layer": "mid"}),
            ]
        ),
        Text("Berlin"),
    )
    await app.agent.handle(Incoming("where do I live?", telegram_user_id=5))
    recall, listing = (json.loads(r) for r in tool_results(fake_llm, 2))
    first = recall["memories"][0]
    assert first["id"] == 1 and first["layer"] == "long" and first["relevance"] == 1.0
    assert {"content", "category", "certainty", "created_at", "source"} <= set(first)
    assert listing["total"] == 1 and listing["memories"][0]["category"] == "goal"

    fake_llm.add(Calls([("memory", {"action": "forget", "memory_id": 2})]), Text("done"))
    await app.agent.handle(Incoming("forget the marathon", telegram_user_id=5))
    assert tool_results(fake_llm, 1) == ["forgot #2"]
    async with app.session_factory() as s:
        ids = list((await s.execute(select(Memory.id))).scalars())
    assert ids == [1]


async def test_bad_input_gets_clear_errors(app: App, fake_llm: FakeOpenAI) -> None:
    # Someone else's memory first.
    fake_llm.add(
        Calls([("memory", {"action": "store", "layer": "long", "content": "Owns a boat"})]),
        Text("ok"),
    )
    await app.agent.handle(Incoming("I own a boat", telegram_user_id=99))
    fake_llm.add(
        Calls(
            [
                ("memory", {"action": "store", "layer": "forever", "content": "x"}),
                ("memory", {"action": "store", "layer": "long", "content": "   "}),
                ("memory", {"action": "store", "layer": "long", "content": "x", "certainty": 1.5}),
                ("memory", {"action": "forget", "memory_id": 1}),
                (
                    "memory",
                    {"action": "store", "layer": "long", "content": "x", "category": "goal"},
                ),
                ("memory", {"action": "recall", "query": ""}),
                ("memory", {"action": "store", "content": "no layer"}),
                ("memory", {"action": "fly"}),
            ]
        ),
        Text("sorry"),
    )
    await app.agent.handle(Incoming("do odd things, and forget #1", telegram_user_id=5))
    r = tool_results(fake_llm, 8)
    assert "layer" in r[0] and "invalid arguments" in r[0]
    assert "non-empty `content`" in r[1]
    assert "certainty" in r[2] and "less than or equal to 1" in r[2]
    assert "no memory #1" in r[3] and "not this user's" in r[3]
    assert "does not fit layer long" in r[4] and "fact" in r[4]
    assert "non-empty `query`" in r[5]
    assert "needs `layer`" in r[6]
    assert "action" in r[7]
    async with app.session_factory() as s:
        contents = list((await s.execute(select(Memory.content))).scalars())
    assert contents == ["Owns a boat"]  # nothing stored, nothing lost


async def test_a_category_without_its_layer_stores_in_the_layer_it_names(
    app: App, fake_llm: FakeOpenAI
) -> None:
    # What a real small model (llama.cpp, forced tool call) sent: a category, no layer.
    fake_llm.add(
        Calls(
            [
                ("memory", {"action": "store", "content": "Cat is Tom", "category": "fact"}),
                ("memory", {"action": "store", "content": "Run a marathon", "category": "goal"}),
                ("memory", {"action": "store", "content": "x", "category": "mood"}),
            ]
        ),
        Text("ok"),
    )
    await app.agent.handle(Incoming("my cat is Tom; I want to run a marathon", telegram_user_id=5))
    r = tool_results(fake_llm, 3)
    assert r[0].startswith("stored #") and r[1].startswith("stored #")
    assert "needs `layer`" in r[2]
    async with app.session_factory() as s:
        rows = (await s.execute(select(Memory.content, Memory.layer))).all()
    # The calls of one round run side by side, so the ids' order is not the calls' order.
    assert sorted(tuple(row) for row in rows) == [("Cat is Tom", "long"), ("Run a marathon", "mid")]


async def test_a_store_with_every_field_filled_in_keeps_the_fact(
    app: App, fake_llm: FakeOpenAI
) -> None:
    # Written out by Qwen2.5-Coder-0.5B (llama-server, greedy) for "Use the memory tool to
    # remember that my sister's name is Ana.": every field of the schema, two of them garbled.
    args = {"action": "store", "layer": "long", "content": "Sister is Ana", "category": "system",
            "certainty": 1, "query": "sister's name", "limit": 10, "memory_id": "ana"}  # fmt: skip
    fake_llm.add(Calls([("memory", args)]), Text("ok"))
    await app.agent.handle(Incoming("my sister is Ana", telegram_user_id=5))
    (r,) = tool_results(fake_llm, 1)
    assert r.startswith("stored #") and "category 'system' left out" in r and "fact" in r, r
    async with app.session_factory() as s:
        rows = (await s.execute(select(Memory.content, Memory.layer, Memory.category))).all()
    assert [tuple(row) for row in rows] == [("Sister is Ana", "long", None)]


async def test_the_model_ends_a_session_with_the_sessions_tool_not_a_memory(
    app: App, fake_llm: FakeOpenAI
) -> None:
    """Ending a session is the sessions feature's typed effect (its new_session tool): the
    next message opens a new session, and the ended one is archived into memory in the
    background."""
    fake_llm.add(Calls([("new_session", {})]), Text("fresh start"), Text("hello again"))
    first = await app.agent.handle(Incoming("let's start over", telegram_user_id=5))
    await app.part(ARCHIVE).idle()
    second = await app.agent.handle(Incoming("hi", telegram_user_id=5))
    assert second.session_id != first.session_id
    seen = [m["content"] for r in fake_llm.requests for m in r["messages"] if m["role"] == "tool"]
    assert any("new session" in c for c in seen)
    async with app.session_factory() as s:
        kept = list((await s.execute(select(Memory.content))).scalars())
    assert len(kept) == 1 and "let's start over" in kept[0]


async def test_auto_recall_puts_memories_in_the_newest_turn(app: App, fake_llm: FakeOpenAI) -> None:
    await app.agent.handle(Incoming("hi", telegram_user_id=5))
    async with app.session_factory() as s:
        from db.models import User

        user_id = (await s.execute(select(User.id))).scalar_one()
    store = app.part(MEMORY)
    await store.store(
        user_id=user_id, layer="long", content="Name is Ann, a nurse", category="fact"
    )
    await store.store(user_id=user_id, layer="short", content="Has a cold this week")
    await store.store(user_id=user_id, layer="mid", content="Learning Spanish", category="goal")
    await store.store(
        user_id=user_id, layer="short", content="x" * 3000
    )  # too big for the budget: left out
    await app.agent.handle(Incoming("any tips for my cold?", telegram_user_id=5))
    system = context_of(fake_llm.requests[-1]["messages"])
    assert "What you remember about the user" in system
    section = system.split("What you remember about the user")[1]
    assert section.index("Name is Ann") < section.index("Has a cold")
    assert "x" * 100 not in section
    assert "[#1] (long/fact) Name is Ann, a nurse" in section


async def test_auto_recall_with_many_memories_keeps_long_term_first(
    app: App, fake_llm: FakeOpenAI
) -> None:
    """More memories than the provider's first page: the long-term query path runs."""
    await app.agent.handle(Incoming("hi", telegram_user_id=6))
    async with app.session_factory() as s:
        from db.models import User

        user_id = (await s.execute(select(User.id))).scalar_one()
    store = app.part(MEMORY)
    topics = [
        "tennis",
        "violin",
        "gardening",
        "chess",
        "baking",
        "sailing",
        "pottery",
        "running",
        "knitting",
        "astronomy",
        "cycling",
        "painting",
        "hiking",
        "poetry",
        "judo",
        "origami",
        "rowing",
        "fishing",
        "skiing",
        "salsa",
        "climbing",
        "yoga",
        "archery",
        "juggling",
    ]
    for i, topic in enumerate(topics):
        await store.store(user_id=user_id, layer="short", content=f"Week {i}: tried {topic}")
    await store.store(user_id=user_id, layer="long", content="Lives in Lyon", category="fact")
    await app.agent.handle(Incoming("how did the rowing go?", telegram_user_id=6))
    section = context_of(fake_llm.requests[-1]["messages"]).split(
        "What you remember about the user"
    )[1]
    assert "Lives in Lyon" in section and "tried rowing" in section
    assert section.index("Lives in Lyon") < section.index("tried rowing")


async def test_doctor_reports_backend_and_reindex(app: App) -> None:
    from tools.memory.doctor import check_memory

    lines = await check_memory(app.part(MEMORY))
    assert [(r.name, r.ok) for r in lines] == [("embeddings", True), ("memory index", True)]
    assert "wordllama" in lines[0].detail and "256 dimensions" in lines[0].detail
    # Another model recorded in the index: doctor says to reindex, recall still answers.
    from tools.memory import repo

    async with app.session_factory() as s, s.begin():
        await repo.set_meta(s, {"model": "openai:text-embedding-3-small"})
    lines = await check_memory(app.part(MEMORY))
    assert not lines[1].ok and lines[1].fix == "run `sidekick memory reindex`"


async def test_reindex_cli_rebuilds_the_index(app: App) -> None:
    from bot.cli import memory_reindex
    from tools.memory import repo

    async with app.session_factory() as s, s.begin():
        from db.repos import core

        user = await core.get_or_create_user(s, 5, "Ann", app.deps.clock())
        await repo.set_meta(s, {"model": "something-else"})
    app.part(MEMORY)._vectors = None  # re-read the (now stale) index state
    await app.part(MEMORY).store(user_id=user.id, layer="long", content="Has a cat named Miso")
    assert not (await app.part(MEMORY).index_status()).ok
    await memory_reindex(app.settings)
    assert (await app.part(MEMORY).index_status()).ok
    hits = await app.part(MEMORY).recall(user_id=user.id, query="what pet do I have")
    assert [h.content for h in hits] == ["Has a cat named Miso"]


async def test_terminal_memory_command_pages_and_forgets(app: App) -> None:
    """/memory in the terminal: the same answer as Telegram's, without its buttons, so a
    page number turns the pages."""
    from bot.terminal.commands import Who, run_command
    from db.repos import core

    async with app.session_factory() as s, s.begin():
        user = await core.get_or_create_user(s, None, "me", app.deps.clock())
    for i in range(7):
        await app.part(MEMORY).store(user_id=user.id, layer="long", content=f"Fact number {i}")
    me = Who(None, "me")
    first = await run_command(app, me, "/memory")
    assert first is not None and first.startswith("long memories, page 1/2 (7 in all):")
    assert "Fact number 6" in first and "Fact number 1" not in first  # newest first
    second = await run_command(app, me, "/memory long 2")
    assert second is not None and second.startswith("long memories, page 2/2")
    assert "Fact number 1" in second and "Fact number 0" in second
    assert await run_command(app, me, "/memory long 3") == "No page 3 of long."
    assert await run_command(app, me, "/memory forget #1") == "Forgot #1."
    assert await run_command(app, me, "/memory forget 1") == "There is no memory #1."
    assert (await run_command(app, me, "/memory mid")) == "No mid memories."
    usage = await run_command(app, me, "/memory forever")
    assert usage is not None and usage.startswith("Usage: /memory")
