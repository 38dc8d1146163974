"""Privacy per chat: a session belongs to one chat, so a group request carries only what the
member said in that group, never their private turns, the summaries standing in for them or
their private memories; what they told the bot in the group is recalled there."""

from __future__ import annotations

import json

from sqlalchemy import select

from bot.agent.prompt import without_context
from db.models.core import ChatSession
from tests.e2e.conftest import OWNER, TG
from tests.e2e.test_memory_e2e import store_via_model
from tests.fakes.openai_server import Calls, Text
from tests.prompt_blocks import context_of
from tools.memory.models import Memory

GROUP = -100777
BOT = "@sidekick_test_bot"


def request_text(tg: TG, index: int = -1) -> str:
    return json.dumps(tg.llm.requests[index]["messages"], ensure_ascii=False)


async def test_a_private_turn_and_memory_never_reach_a_group_request(tg: TG) -> None:
    await tg.send(OWNER, "my garden gate code is 4711")
    assert (await tg.reply(OWNER)).text == "echo: my garden gate code is 4711"
    await store_via_model(tg, OWNER, "Owes Ana 300 euros")

    await tg.send(OWNER, f"{BOT} what did I tell you so far?", chat_id=GROUP)
    assert (await tg.reply(GROUP)).text == "echo: what did I tell you so far?"
    group_request = request_text(tg)
    assert "what did I tell you so far?" in group_request  # the request is this one
    for private in ("4711", "garden gate", "Owes Ana", "remember:"):
        assert private not in group_request

    # Told in the group, kept for the group: recalled there (auto-recall and the tool),
    # still without the private memory.
    args = {"action": "store", "layer": "long", "content": "Brings the cake on Friday",
            "category": "fact"}  # fmt: skip
    tg.llm.add(Calls([("memory", args)]), Text("noted"))
    await tg.send(OWNER, f"{BOT} remember: I bring the cake on Friday", chat_id=GROUP)
    assert (await tg.reply(GROUP)).text == "noted"
    tg.llm.add(Calls([("memory", {"action": "recall", "query": "Ana cake euros"})]), Text("Cake."))
    await tg.send(OWNER, f"{BOT} what do I bring, and do I owe Ana?", chat_id=GROUP)
    assert (await tg.reply(GROUP)).text == "Cake."
    first, second = tg.llm.requests[-2:]
    assert "Brings the cake on Friday" in context_of(first["messages"])
    tool_result = [m for m in second["messages"] if m["role"] == "tool"][-1]["content"]
    assert "Brings the cake on Friday" in tool_result
    for request in (first, second):
        dumped = json.dumps(request["messages"])
        assert "Owes Ana" not in dumped and "4711" not in dumped

    # The private chat goes on with its own history (and sees all of the user's memories);
    # the group's turns are not in it.
    await tg.send(OWNER, "and what is my gate code?")
    await tg.reply(OWNER)
    private_request = request_text(tg)
    assert "4711" in private_request and "what do I bring" not in private_request
    assert "Brings the cake on Friday" in context_of(tg.llm.requests[-1]["messages"])

    async with tg.app.session_factory() as s:
        chats = (await s.execute(select(ChatSession.chat_id).order_by(ChatSession.id))).all()
        sources = dict((await s.execute(select(Memory.content, Memory.chat_id))).all())
    assert [c for (c,) in chats] == [None, GROUP]
    assert sources == {"Owes Ana 300 euros": None, "Brings the cake on Friday": GROUP}


async def test_newsession_in_a_group_starts_over_there_only(tg: TG) -> None:
    await tg.send(OWNER, "private note: pick up the parcel")
    await tg.reply(OWNER)
    await tg.send(OWNER, f"{BOT} group talk", chat_id=GROUP)
    await tg.reply(GROUP)
    await tg.send(OWNER, "/newsession", chat_id=GROUP)
    assert "new session" in (await tg.reply(GROUP)).text.lower()
    await tg.send(OWNER, f"{BOT} anything before?", chat_id=GROUP)
    await tg.reply(GROUP)
    # Not a turn of the history any more (the ended session's summary, once written, is the
    # group's memory and may be recalled there); the summary's own model call runs beside.
    asked = next(r for r in reversed(tg.llm.requests) if "anything before?" in json.dumps(r))
    turns = [without_context(str(m["content"])) for m in asked["messages"][1:]]
    assert turns == ["anything before?"]
    await tg.send(OWNER, "and in here?")
    await tg.reply(OWNER)
    asked = next(r for r in reversed(tg.llm.requests) if "and in here?" in json.dumps(r))
    assert "pick up the parcel" in json.dumps(asked)  # the private session was left open


async def test_sessions_asked_in_a_group_are_listed_in_private(tg: TG) -> None:
    await tg.send(OWNER, "private note: pick up the parcel")
    await tg.reply(OWNER)
    await tg.send(OWNER, "/sessions", chat_id=GROUP)
    told = (await tg.reply(GROUP)).text
    assert "sessions" in told and "parcel" not in told
    assert "session" in (await tg.reply(OWNER)).text.lower()


async def test_a_group_store_names_no_private_fact_it_may_contradict(tg: TG) -> None:
    await store_via_model(tg, OWNER, "Lives in Porto")  # private
    args = {"action": "store", "layer": "long", "content": "Lives in Lisbon", "category": "fact"}
    tg.llm.add(Calls([("memory", args)]), Text("noted"))
    await tg.send(OWNER, f"{BOT} remember: I live in Lisbon", chat_id=GROUP)
    assert (await tg.reply(GROUP)).text == "noted"
    result = [m for m in tg.llm.requests[-1]["messages"] if m["role"] == "tool"][-1]["content"]
    assert result == "stored #2" and "Porto" not in request_text(tg)
    # In private, the same store is told of the older fact.
    tg.llm.add(Calls([("memory", args)]), Text("noted"))
    await tg.send(OWNER, "remember: I live in Lisbon")
    await tg.reply(OWNER)
    result = [m for m in tg.llm.requests[-1]["messages"] if m["role"] == "tool"][-1]["content"]
    assert "It may contradict #1 ('Lives in Porto')" in result
