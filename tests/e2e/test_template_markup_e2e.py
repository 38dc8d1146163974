"""Nothing of the template reaches the person, through the assembled app (issue 46 item 2):
the fake model answers with what a real 1.5B model wrote over a day (tests/fixtures/llm/day/);
a reply that was only markup, or the person's question given back, is a failed call: the
model is told and asked once more, and the person never reads "(empty answer)"."""

from __future__ import annotations

import json
from pathlib import Path

from bot.agent.markup import ASK_AGAIN, GAVE_UP, UNREAD
from tests.e2e.conftest import OWNER, TG
from tests.fakes.openai_server import Calls, Text

DAY = json.loads(
    (Path(__file__).parents[1] / "fixtures" / "llm" / "day" / "excerpts.json").read_text()
)
REPLIES = DAY["replies"]
MARKS = ("<tool", "<function", "</", "<|", "[context]", "arguments=", "(empty answer)", UNREAD)


def seen_by_user(tg: TG) -> list[str]:
    texts = [m.text or "" for m in tg.server.sent_to(OWNER)]
    return texts + [str(d.params.get("text") or "") for d in tg.server.drafts]


def assert_nothing_of_the_template(tg: TG) -> None:
    for text in seen_by_user(tg):
        for mark in MARKS:
            assert mark not in text, text


async def test_a_reply_of_markup_is_asked_again_and_never_shown(tg: TG) -> None:
    first = REPLIES["9"]
    tg.llm.add(
        Text(first["content"], chunk=4, delay=0.01),
        Text("I will remember that Anna lives in Porto.", chunk=4),
    )
    await tg.send(OWNER, first["message"])
    assert (await tg.reply(OWNER)).text == "I will remember that Anna lives in Porto."
    await tg.idle()
    assert_nothing_of_the_template(tg)
    again = tg.llm.requests[1]["messages"]
    assert again[-1] == {"role": "user", "content": ASK_AGAIN["markup"]}
    assert "<tools>" not in json.dumps(again)
    # The next turn's history holds the answer, not the markup.
    tg.llm.add(Text("ok"))
    await tg.send(OWNER, "thanks")
    await tg.reply(OWNER)
    assert "<tools>" not in json.dumps(tg.llm.requests[-1]["messages"])


async def test_markup_twice_is_said_in_one_line_not_as_an_empty_answer(tg: TG) -> None:
    tg.llm.add(Text(REPLIES["43"]["content"]), Text(REPLIES["45"]["content"], chunk=3))
    await tg.send(OWNER, REPLIES["45"]["message"])
    assert (await tg.reply(OWNER)).text == GAVE_UP["markup"]
    await tg.idle()
    assert len(tg.llm.requests) == 2
    assert_nothing_of_the_template(tg)


async def test_the_placeholder_given_back_is_no_answer(tg: TG) -> None:
    # The real 0.5B model (make test-real), asked again after a reply that only copied the
    # [context] block, answered with the placeholder it was shown for that reply.
    tg.llm.add(Text(REPLIES["9"]["content"], chunk=4), Text(UNREAD, chunk=3))
    await tg.send(OWNER, REPLIES["9"]["message"])
    assert (await tg.reply(OWNER)).text == GAVE_UP["markup"]
    await tg.idle()
    assert_nothing_of_the_template(tg)


async def test_an_imitated_tool_result_is_not_shown(tg: TG) -> None:
    tg.llm.add(Text(REPLIES["31"]["content"], chunk=5), Text("Your plate is 42-XP-17."))
    await tg.send(OWNER, REPLIES["31"]["message"])
    assert (await tg.reply(OWNER)).text == "Your plate is 42-XP-17."
    await tg.idle()
    assert_nothing_of_the_template(tg)
    assert not any("No matching memories" in t for t in seen_by_user(tg))


async def test_a_real_answer_wrapped_in_result_tags_is_shown_without_them(tg: TG) -> None:
    tg.llm.add(
        Calls([("code", {"action": "execute", "code": "console.log(6 * 7)"})]),
        Text("<tool_response>The answer is 42.</tool_response>", chunk=6),
    )
    await tg.send(OWNER, "What is 6 times 7? Use code.")
    assert (await tg.reply(OWNER)).text == "The answer is 42."
    await tg.idle()
    assert_nothing_of_the_template(tg)


async def test_the_question_given_back_is_asked_again(tg: TG) -> None:
    # 40: the [context] block copied, then the person's question as the answer.
    echoed = REPLIES["40"]
    tg.llm.add(Text(echoed["content"], chunk=5), Text("I do not know where your sister lives."))
    await tg.send(OWNER, echoed["message"])
    assert (await tg.reply(OWNER)).text == "I do not know where your sister lives."
    await tg.idle()
    assert tg.llm.requests[1]["messages"][-1]["content"] == ASK_AGAIN["echo"]
    assert_nothing_of_the_template(tg)


async def test_our_words_to_the_model_given_back_are_no_answer(tg: TG) -> None:
    """Held, the 1.5B model gave an empty reply, was told "Your last reply was empty: the
    user saw nothing. …", and answered with that sentence (bench/tool_use.py --day,
    2026-12-06): Sidekick's words to the model never reach the person, in drafts either."""
    said = ASK_AGAIN["empty"].split(". ")[0] + "."
    tg.llm.add(Text(""), Text(said, chunk=4))
    await tg.send(OWNER, "I need some advice about my weekend rota.")
    assert (await tg.reply(OWNER)).text == GAVE_UP["ours"]
    await tg.idle()
    assert not any("Your last reply" in t for t in seen_by_user(tg))

    # Asked again, a real answer is shown.
    tg.llm.add(Text(said), Text("Tell your manager plainly what you can cover."))
    await tg.send(OWNER, "How do I talk to my manager?")
    assert (await tg.reply(OWNER)).text == "Tell your manager plainly what you can cover."
