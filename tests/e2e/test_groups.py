"""Groups: the bot answers only when addressed (mention, reply to it, command) unless
GROUP_REPLIES=all; each member keeps their own history; strangers are told only when they
talk to the bot."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from bot.agent.prompt import without_context
from bot.telegram.routers.features import SENT_PRIVATELY
from tests.e2e.conftest import OWNER, STRANGER, TG
from tests.e2e.test_memory_e2e import store_via_model
from tests.fakes.openai_server import Calls, Text
from tests.prompt_blocks import context_of
from tools.memory.tool import PRIVATE

GROUP = -100777


def user_texts(tg: TG) -> list[str]:
    return [
        without_context(m["content"])
        for m in tg.llm.requests[-1]["messages"]
        if m["role"] == "user"
    ]


async def test_only_addressed_messages_are_answered(tg: TG) -> None:
    await tg.send(OWNER, "just people talking", chat_id=GROUP)
    await tg.send(OWNER, "@Sidekick_Test_Bot what is up?", chat_id=GROUP)
    reply = await tg.reply(GROUP)
    assert reply.text == "echo: what is up?"  # the mention is not sent to the model
    await tg.idle()
    assert tg.unread(GROUP) == [] and user_texts(tg) == ["what is up?"]
    bot_message = {"message_id": 1, "date": 0, "chat": {"id": GROUP, "type": "supergroup"},
                   "from": {"id": tg.server.bot_id, "is_bot": True, "first_name": "Sidekick"},
                   "text": "echo: what is up?"}  # fmt: skip
    await tg.send(OWNER, "and then?", chat_id=GROUP, reply_to_message=bot_message)
    assert (await tg.reply(GROUP)).text == "echo: and then?"


async def test_each_member_has_their_own_history(tg: TG) -> None:
    await tg.send(OWNER, "@sidekick_test_bot mine", chat_id=GROUP)
    await tg.reply(GROUP)
    await tg.send(2001, "@sidekick_test_bot theirs", chat_id=GROUP)
    await tg.reply(GROUP)
    assert user_texts(tg) == ["theirs"]


async def test_group_replies_all(make_tg: Callable[..., Awaitable[TG]]) -> None:
    tg = await make_tg(group_replies="all")
    await tg.send(OWNER, "no mention needed", chat_id=GROUP)
    assert (await tg.reply(GROUP)).text == "echo: no mention needed"


async def test_strangers_in_a_group_are_told_only_when_they_address_the_bot(tg: TG) -> None:
    await tg.send(STRANGER, "chatting with friends", chat_id=GROUP)
    await tg.idle()
    assert tg.unread(GROUP) == []
    await tg.send(STRANGER, "@sidekick_test_bot hi", chat_id=GROUP)
    reply: Any = await tg.reply(GROUP)
    assert str(STRANGER) in reply.text


async def test_memory_asked_in_a_group_is_answered_in_private(tg: TG) -> None:
    await store_via_model(tg, OWNER, "Lives in Porto")
    await tg.send(OWNER, "/memory", chat_id=GROUP)
    assert (await tg.reply(GROUP)).text == SENT_PRIVATELY.format(command="memory")
    private = await tg.reply(OWNER)
    assert "Lives in Porto" in private.text and private.reply_markup  # forget buttons there
    assert not [m for m in tg.server.sent_to(GROUP) if "Porto" in m.text]


async def test_memory_in_a_group_when_the_bot_cannot_write_in_private(tg: TG) -> None:
    await store_via_model(tg, 2001, "Lives in Porto")
    tg.server.fail_next("sendMessage", 403)  # the member never opened a private chat
    await tg.send(2001, "/memory", chat_id=GROUP)
    told = (await tg.reply(GROUP)).text
    assert "only in a private chat" in told and "@sidekick_test_bot" in told
    assert "Porto" not in told


async def test_recall_in_a_group_leaves_private_memories_out(tg: TG) -> None:
    await store_via_model(tg, OWNER, "Lives in Porto")
    tg.llm.add(Calls([("memory", {"action": "recall", "query": "home"})]), Text("Not here."))
    await tg.send(OWNER, "@sidekick_test_bot where do I live?", chat_id=GROUP)
    assert (await tg.reply(GROUP)).text == "Not here."
    first, second = tg.llm.requests[-2:]
    assert "Lives in Porto" not in context_of(first["messages"])  # no auto-recall
    result = [m for m in second["messages"] if m["role"] == "tool"][-1]["content"]
    assert result == PRIVATE
    # In private, both work as before.
    tg.llm.add(Calls([("memory", {"action": "recall", "query": "home"})]), Text("Porto."))
    await tg.send(OWNER, "where do I live?")
    assert (await tg.reply(OWNER)).text == "Porto."
    assert "Lives in Porto" in context_of(tg.llm.requests[-2]["messages"])
