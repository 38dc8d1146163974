"""Small inputs that used to crash a whole turn or command now fail only that one item:
deeply nested JSON in a tool call's arguments, a huge number in /memory forget, and a
malformed update from a Telegram-compatible server (polling goes on for everyone)."""

from __future__ import annotations

import json
import logging

import pytest

from tests.e2e.conftest import OWNER, TG
from tests.fakes.openai_server import Calls, Text

DEEP = '{"action": "list", "x": ' + "[" * 10_000 + "]" * 10_000 + "}"


def tool_results(tg: TG) -> list[str]:
    return [m["content"] for m in tg.llm.requests[-1]["messages"] if m.get("role") == "tool"]


async def test_deeply_nested_tool_arguments_fail_only_that_call(tg: TG) -> None:
    tg.llm.add(Calls([("memory", DEEP), ("memory", {"action": "list"})]), Text("done"))
    await tg.send(OWNER, "list my memories")
    assert (await tg.reply(OWNER)).text == "done"
    first, second = tool_results(tg)
    assert first.startswith("Error: arguments are nested too deeply") and len(first) < 300
    assert not second.startswith("Error")  # the other call of the same turn ran


@pytest.mark.parametrize(
    "arg", ["99999999999999999999999", "#99999999999999999999999", "2147483648", "²", "-1", "1e9"]
)
async def test_memory_forget_with_a_bad_number_is_a_usage_line(tg: TG, arg: str) -> None:
    await tg.send(OWNER, f"/memory forget {arg}")
    reply = await tg.reply(OWNER)
    assert reply.text.startswith("Usage: /memory") and "\n" not in reply.text


async def test_memory_forget_with_a_long_id_in_range_says_there_is_none(tg: TG) -> None:
    # The largest id the table holds on both databases (PostgreSQL's INTEGER is 32 bits).
    await tg.send(OWNER, "/memory forget 2147483647")
    assert (await tg.reply(OWNER)).text == "There is no memory #2147483647."


async def test_a_malformed_update_is_skipped_without_users_texts_in_the_log(
    tg: TG, caplog: pytest.LogCaptureFixture
) -> None:
    secret_text = "my bank PIN is 4711"
    bad = {
        "message": {
            "message_id": 5,
            "date": "not a date",  # fails validation
            "chat": {"id": OWNER, "type": "private"},
            "from": {"id": OWNER, "is_bot": False, "first_name": "T"},
            "text": secret_text,
        }
    }
    tg.llm.add(Text("still here"))
    with caplog.at_level(logging.DEBUG):
        await tg.send_update(bad)
        await tg.send(OWNER, "hello")
        assert (await tg.reply(OWNER)).text == "still here"
    assert secret_text not in caplog.text
    skipped = [r for r in caplog.records if "skipped a malformed update" in r.getMessage()]
    assert len(skipped) == 1
    assert json.dumps(bad)[:20] not in caplog.text


def toasts(tg: TG) -> list[str]:
    return [c.params.get("text", "") for c in tg.server.calls if c.method == "answerCallbackQuery"]


async def test_a_lone_surrogate_in_a_message_is_replaced_and_the_turn_runs(tg: TG) -> None:
    # Telegram's JSON may carry "\ud83d" alone (a client cut an emoji in half); Python reads
    # it as a lone surrogate, which no database or model API can encode.
    tg.llm.add(Text("fine"))
    await tg.send(OWNER, "half an emoji: \ud83d, the rest")
    assert (await tg.reply(OWNER)).text == "fine"
    sent = [m["content"] for m in tg.llm.requests[-1]["messages"] if m.get("role") == "user"]
    assert "half an emoji: \ufffd, the rest" in str(sent[-1])


async def test_a_lone_surrogate_in_a_command_argument_is_replaced(tg: TG) -> None:
    await tg.send(OWNER, "/memory search \udc80x")
    reply = await tg.reply(OWNER)
    assert "wrong" not in reply.text.lower()


HUGE = "99999999999999999999999"


@pytest.mark.parametrize(
    ("data", "toast"),
    [
        (f"approvals:answer:{HUGE}:once", "This question is closed."),
        ("approvals:answer:\u00b2:once", "This question is closed."),
        (f"approvals:revoke:{HUGE}", "That button is out of date."),
        ("approvals:revoke:\u00b2", "That button is out of date."),
        (f"reminders:pause:{HUGE}", "That button is out of date."),
        ("reminders:pause:\u00b2", "That button is out of date."),
        (f"code:file:{HUGE}", "That button is out of date."),
        ("code:file:\u00b2", "That button is out of date."),
    ],
)
async def test_a_forged_button_with_a_bad_number_gets_a_clear_answer(
    tg: TG, data: str, toast: str
) -> None:
    tg.llm.add(Text("hello"))
    await tg.send(OWNER, "hi")
    message = await tg.reply(OWNER)
    await tg.press(OWNER, data, message_id=message.message_id)
    await tg.idle()
    assert toasts(tg) == [toast]
    assert not tg.unread(OWNER)  # no "Something went wrong"
