"""Template markup never reaches the person (bot/agent/markup.py), replayed on what a real
1.5B model wrote over a day (tests/fixtures/llm/day/, issue 46 item 2): its unread call
forms, imitated tool results, copies of the [context] block, its own question given back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.agent.markup import failure, repeats, shown

DAY = json.loads((Path(__file__).parent / "fixtures" / "llm" / "day" / "excerpts.json").read_text())
REPLIES = DAY["replies"]
MARKS = ("<tool", "<function", "</", "<|", "[context]", "[/context]", "[earlier]", "arguments=")


def no_marks(text: str) -> None:
    for mark in MARKS:
        assert mark not in text, text


@pytest.mark.parametrize("n", sorted(REPLIES, key=int))
def test_no_recorded_reply_shows_markup_in_any_draft_or_answer(n: str) -> None:
    reply = REPLIES[n]
    content, ran = reply["content"], reply["tool_ran"]
    for end in range(1, len(content) + 1):
        no_marks(shown(content[:end], results=ran, final=False))
    no_marks(shown(content, results=ran))


@pytest.mark.parametrize("n", ["7", "8", "9", "12", "20", "31", "33", "43", "45"])
def test_a_reply_of_markup_alone_is_a_failed_call(n: str) -> None:
    reply = REPLIES[n]
    assert reply["content"].strip() and not shown(reply["content"], results=reply["tool_ran"])
    assert failure(reply["content"], shown(reply["content"]), reply["message"]) == "markup"


def test_an_imitated_result_is_dropped_and_a_real_answer_in_its_tags_kept() -> None:
    # 31: "<tool_response>No matching memories.</tool_response>" with no tool run.
    assert shown(REPLIES["31"]["content"], results=False) == ""
    # 34: the code tool had run; the model wrapped its (right) answer in the same tags.
    answer = shown(REPLIES["34"]["content"], results=True)
    assert answer.startswith('The SHA-256 hash of the word "sidekick" is ed190977'), answer


@pytest.mark.parametrize("n", ["40", "42"])
def test_the_question_given_back_is_no_answer(n: str) -> None:
    reply = REPLIES[n]
    text = shown(reply["content"], results=True)
    assert "[context]" not in text
    assert failure(reply["content"], text, reply["message"]) == "echo"


@pytest.mark.parametrize(
    ("answer", "question"),
    [
        ("Which sister do you mean?", "Where does my sister live?"),
        ("Which Ana?", "Remind me to call Ana."),
        ("Anna lives in Porto.", "Where does my sister Anna live?"),
        ("Do you want it at 9:00 or at 10:00?", "Remind me tomorrow morning to call Ana."),
    ],
)
def test_an_answer_or_a_real_question_back_is_not_an_echo(answer: str, question: str) -> None:
    assert not repeats(answer, question)


def test_ordinary_text_and_code_are_left_alone() -> None:
    text = (
        'Use the `<output>` element:\n```html\n<output name="x">1</output>\n<function_x/>\n```\n'
        "For a < b, see [the docs] and <b>bold</b>."
    )
    assert shown(text) == text
    assert shown("Sure.<|im_end|>") == "Sure."
    assert shown('[TOOL_CALLS][{"name": "x"}]') == ""
    assert shown('Hi.\n<tool_call>\n{"name": "memory"') == "Hi."
