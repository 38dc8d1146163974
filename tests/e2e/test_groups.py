"""Groups: the bot answers only when addressed (mention, reply to it, command) unless
GROUP_REPLIES=all; each member keeps their own history; strangers are told only when they
talk to the bot."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from bot.agent.prompt import without_context
from tests.e2e.conftest import OWNER, STRANGER, TG

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
