"""Facts that stay true, through the assembled app: a new fact that contradicts a stored one
supersedes it (the old one kept and shown as its history, out of recall, so the next answer
is given the new one); "forget that" and "that is wrong, it's X" act on the memory the last
answer used; each memory keeps where and when it came from."""

from __future__ import annotations

import json

from sqlalchemy import select

from tests.e2e.conftest import OWNER, TG
from tests.e2e.test_memory_e2e import memory_contents, store_via_model
from tests.fakes.openai_server import Calls, Text
from tests.prompt_blocks import context_of
from tools.memory.models import Memory


def last_tool_result(tg: TG) -> str:
    return str([m for m in tg.llm.requests[-1]["messages"] if m["role"] == "tool"][-1]["content"])


async def test_a_contradicting_fact_supersedes_the_old_and_the_answer_uses_the_new(tg: TG) -> None:
    await store_via_model(tg, OWNER, "Lives in Porto")
    moved = {"action": "store", "layer": "long", "category": "fact",
             "content": "Lives in Lisbon", "replaces": 1}  # fmt: skip
    tg.llm.add(Calls([("memory", moved)]), Text("Noted: Lisbon."))
    await tg.send(OWNER, "I moved to Lisbon")
    assert (await tg.reply(OWNER)).text == "Noted: Lisbon."
    assert last_tool_result(tg) == "stored #2 (replaces #1, kept as its history)"

    tg.llm.add(Calls([("memory", {"action": "recall", "query": "where does the user live"})]),
               Text("In Lisbon."))  # fmt: skip
    await tg.send(OWNER, "where do I live?")
    assert (await tg.reply(OWNER)).text == "In Lisbon."
    asked = tg.llm.requests[-2]
    assert "Lives in Lisbon" in context_of(asked["messages"])
    assert "Lives in Porto" not in context_of(asked["messages"])
    found = json.loads(last_tool_result(tg))["memories"]
    assert [m["content"] for m in found] == ["Lives in Lisbon"]
    assert found[0]["before"][0].startswith("Lives in Porto (")  # "says so when asked"

    # The old fact is kept as history, with when it was replaced, and /memory shows it.
    async with tg.app.session_factory() as s:
        porto = (await s.execute(select(Memory).where(Memory.id == 1))).scalar_one()
    assert porto.superseded_by == 2 and porto.superseded_at is not None
    await tg.send(OWNER, "/memory")
    listing = (await tg.reply(OWNER)).text
    assert "#2 [long · fact] Lives in Lisbon" in listing and "was: Lives in Porto (" in listing
    assert "#1 " not in listing and "(1 in all)" in listing


async def test_forget_that_removes_the_memory_the_last_answer_used(tg: TG) -> None:
    await store_via_model(tg, OWNER, "Lives in Porto")
    await store_via_model(tg, OWNER, "Likes green tea", "preference")
    tg.llm.add(Calls([("memory", {"action": "recall", "query": "tea"})]),
               Text("You like green tea."))  # fmt: skip
    await tg.send(OWNER, "what do I like to drink?")
    assert (await tg.reply(OWNER)).text == "You like green tea."

    tg.llm.add(Calls([("memory", {"action": "forget"})]), Text("Forgotten."))
    await tg.send(OWNER, "forget that")
    assert (await tg.reply(OWNER)).text == "Forgotten."
    assert last_tool_result(tg) == "forgot #2"
    assert await memory_contents(tg) == ["Lives in Porto"]


async def test_that_is_wrong_replaces_the_memory_the_last_answer_used(tg: TG) -> None:
    await store_via_model(tg, OWNER, "Lives in Porto")
    await store_via_model(tg, OWNER, "Likes green tea", "preference")
    tg.llm.add(Text("You live in Porto."))  # auto-recall gave it the memories
    await tg.send(OWNER, "where do I live?")
    assert (await tg.reply(OWNER)).text == "You live in Porto."
    assert "Lives in Porto" in context_of(tg.llm.requests[-1]["messages"])

    fix = {"action": "store", "layer": "long", "category": "fact",
           "content": "Lives in Braga", "replaces": "last"}  # fmt: skip
    tg.llm.add(Calls([("memory", fix)]), Text("Fixed."))
    await tg.send(OWNER, "that is wrong, it's Braga")
    assert (await tg.reply(OWNER)).text == "Fixed."
    assert last_tool_result(tg) == "stored #3 (replaces #1, kept as its history)"
    tg.llm.add(Text("Braga."))
    await tg.send(OWNER, "so where do I live?")
    await tg.reply(OWNER)
    context = context_of(tg.llm.requests[-1]["messages"])
    assert "Lives in Braga" in context and "Lives in Porto" not in context
    assert "Likes green tea" in context  # the other memory was not touched


async def test_forget_that_with_nothing_used_asks_which(tg: TG) -> None:
    tg.llm.add(Calls([("memory", {"action": "forget"})]), Text("Which one?"))
    await tg.send(OWNER, "forget that")
    assert (await tg.reply(OWNER)).text == "Which one?"
    assert "no memory I can point at" in last_tool_result(tg)


async def test_each_memory_keeps_where_and_when_it_came_from(tg: TG) -> None:
    await store_via_model(tg, OWNER, "Lives in Porto")
    async with tg.app.session_factory() as s:
        m = (await s.execute(select(Memory))).scalar_one()
    assert m.session_id is not None and m.message_id is not None and m.created_at is not None
    assert m.chat_id is None  # the user's own chat
    tg.llm.add(Calls([("memory", {"action": "list"})]), Text("listed"))
    await tg.send(OWNER, "what do you know?")
    await tg.reply(OWNER)
    item = json.loads(last_tool_result(tg))["memories"][0]
    assert item["created_at"] and item["source"]


async def test_a_store_names_the_fact_it_may_contradict_and_recall_puts_the_newer_first(
    tg: TG,
) -> None:
    await store_via_model(tg, OWNER, "Lives in Porto")
    await store_via_model(tg, OWNER, "Lives in Lisbon")  # the model did not say it replaces
    async with tg.app.session_factory() as s:
        rows = (await s.execute(select(Memory.id, Memory.superseded_by))).all()
    assert sorted(rows) == [(1, None), (2, None)]  # nothing replaced by a guess
    said = [m for m in tg.llm.requests[-1]["messages"] if m["role"] == "tool"][-1]["content"]
    assert said.startswith("stored #2. It may contradict #1 ('Lives in Porto')")
    tg.llm.add(Calls([("memory", {"action": "recall", "query": "lives in Porto"})]),
               Text("Lisbon, it seems."))  # fmt: skip
    await tg.send(OWNER, "Porto or Lisbon?")
    await tg.reply(OWNER)
    found = json.loads(last_tool_result(tg))["memories"]
    assert [m["content"] for m in found][:2] == ["Lives in Lisbon", "Lives in Porto"]

    # The model takes the hint: the same fact again, now replacing the old one.
    again = {"action": "store", "layer": "long", "category": "fact",
             "content": "Lives in Lisbon", "replaces": 1}  # fmt: skip
    tg.llm.add(Calls([("memory", again)]), Text("ok"))
    await tg.send(OWNER, "yes, I moved")
    await tg.reply(OWNER)
    assert last_tool_result(tg) == "updated #2 (replaces #1, kept as its history)"
    assert await memory_contents(tg) == ["Lives in Porto", "Lives in Lisbon"]  # both rows kept
    tg.llm.add(Calls([("memory", {"action": "recall", "query": "Porto Lisbon live"})]),
               Text("Lisbon."))  # fmt: skip
    await tg.send(OWNER, "Porto or Lisbon, then?")
    await tg.reply(OWNER)
    assert [m["content"] for m in json.loads(last_tool_result(tg))["memories"]] == [
        "Lives in Lisbon"
    ]
