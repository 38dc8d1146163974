"""An answer word for word the same as one given to an earlier message is no answer: the
model is told and asked once more (bot/agent/runner.py, as a reply that gives back the
person's question is). Recorded by `bench/tool_use.py --day --constrained off --model
qwen2.5-coder-1.5b-instruct-q4_k_m --show` (2026-12-06): after its first turn ended in
"I'm sorry, but I can't assist with that.", the 1.5B model gave that answer to each of the
next ten messages, whatever they asked; the history taught it. Short answers said twice
("Noted.") are answers, and a copy that comes again is shown."""

from __future__ import annotations

from sqlalchemy import select

from bot.agent.markup import ASK_AGAIN, UNREAD
from tests.e2e.conftest import OWNER, TG
from tests.fakes.openai_server import Calls, Text
from tools.memory.models import Memory

SORRY = "I'm sorry, but I can't assist with that."
STORE = {"action": "store", "layer": "long", "content": "Allergic to peanuts"}


async def memories(tg: TG) -> list[str]:
    async with tg.app.session_factory() as s:
        return list((await s.execute(select(Memory.content))).scalars())


async def test_an_answer_copied_from_an_earlier_turn_is_asked_again(tg: TG) -> None:
    tg.llm.add(Text(SORRY))
    await tg.send(OWNER, "Hi! I'm Marta. I work as a nurse in Lisbon.")
    assert (await tg.reply(OWNER)).text == SORRY  # the first time, it is an answer
    tg.llm.add(Text(SORRY), Calls([("memory", STORE)]), Text("Noted: peanuts."))
    await tg.send(OWNER, "Remember that I'm allergic to peanuts.")
    assert (await tg.reply(OWNER)).text == "Noted: peanuts."
    await tg.idle()
    assert await memories(tg) == ["Allergic to peanuts"]
    again = tg.llm.requests[2]["messages"]
    assert again[-2:] == [
        {"role": "assistant", "content": UNREAD},
        {"role": "user", "content": ASK_AGAIN["copy"]},
    ]


async def test_a_copy_that_comes_again_is_shown_and_short_answers_are_answers(tg: TG) -> None:
    tg.llm.add(Text(SORRY))
    await tg.send(OWNER, "Hi!")
    await tg.reply(OWNER)
    tg.llm.add(Text(SORRY), Text(SORRY))
    await tg.send(OWNER, "What's 12345 times 6789?")
    assert (await tg.reply(OWNER)).text == SORRY
    assert len(tg.llm.requests) == 3
    tg.llm.add(Text("Noted."), Text("Noted."))
    for text in ("My sister is Anna.", "She lives in Porto."):
        await tg.send(OWNER, text)
        assert (await tg.reply(OWNER)).text == "Noted."
    assert len(tg.llm.requests) == 5


async def test_an_empty_reply_is_asked_again(tg: TG) -> None:
    """Recorded the same way: the 1.5B model's first turns ended empty after a store, and
    from the third message on its first reply was empty, every time (0 of 13 right). Asked
    again once a request: empty twice, the person reads what the tools did."""
    tg.llm.add(Text(""), Calls([("memory", STORE)]), Text("Noted: peanuts."))
    await tg.send(OWNER, "Remember that I'm allergic to peanuts.")
    assert (await tg.reply(OWNER)).text == "Noted: peanuts."
    await tg.idle()
    assert await memories(tg) == ["Allergic to peanuts"]
    tg.llm.add(Calls([("memory", {"action": "list"})]), Text(""), Text("You are allergic."))
    await tg.send(OWNER, "What do you keep about me?")
    assert (await tg.reply(OWNER)).text == "You are allergic."
    tg.llm.add(Calls([("memory", {"action": "list"})]), Text(""), Text(""))
    await tg.send(OWNER, "And now?")
    said = (await tg.reply(OWNER)).text
    assert said.startswith("(The model gave no answer after using memory.)"), said
    asked = [r["messages"][-1]["content"] for r in tg.llm.requests]
    assert asked.count(ASK_AGAIN["empty"]) == 3, asked


async def test_the_same_question_asked_again_may_get_the_same_answer(tg: TG) -> None:
    answer = "Your sister's name is Ana, she lives in Porto."
    for _ in range(2):
        tg.llm.add(Text(answer))
        await tg.send(OWNER, "What is my sister's name?")
        assert (await tg.reply(OWNER)).text == answer
    assert len(tg.llm.requests) == 2  # not asked again: the person asked the same thing
