"""Faults under load, as a user meets them (issue 45): an approval question Telegram cannot
take waits for it (it is not a no), and Telegram's 429 holds every send for as long as it
asked."""

from __future__ import annotations

from bot.approvals.gate import APPROVALS
from tests.e2e.conftest import OWNER, TG
from tests.e2e.test_approvals_e2e import button, decisions, tool_result, with_post_tool
from tests.fakes.openai_server import Calls, Text
from tests.fakes.telegram_server import Call

ANSWER_S = 5.0  # the time to answer, shorter than the outage below


def question_tries(tg: TG) -> list[Call]:
    return [
        c for c in tg.server.calls
        if c.method == "sendMessage" and c.status != 200 and c.params.get("reply_markup")
    ]  # fmt: skip


async def polling(tg: TG) -> None:
    """The bot has started polling (an outage before would stop its start)."""
    await tg.server.wait_for(lambda: any(c.method == "getUpdates" for c in tg.server.calls))


async def test_a_question_telegram_cannot_take_waits_for_it_and_is_not_a_no(tg: TG) -> None:
    tg.app.part(APPROVALS).timeout_s = ANSWER_S
    tg.runtime.outbox.probe_max_s = 0.2  # the courier's tries, close together for the test
    posted: list[str] = []
    with_post_tool(tg.app, posted)
    await polling(tg)
    tg.server.down(502)
    tg.llm.add(Calls([("post", {"url": "https://example.org/x", "body": "hi"})]), Text("Done."))
    await tg.send(OWNER, "post it")

    def outage_outlasted_the_answer_time() -> bool:
        tries = question_tries(tg)
        return len(tg.llm.requests) > 1 or (
            len(tries) > 6 and tries[-1].at - tries[0].at > ANSWER_S + 1
        )

    await tg.server.wait_for(outage_outlasted_the_answer_time)
    assert len(tg.llm.requests) == 1, tool_result(tg.llm.requests[1])  # the turn still waits
    assert await decisions(tg.app) == [("pending", "post", OWNER)]
    tg.server.up()
    question = await tg.reply(OWNER)
    assert question.reply_markup and "may I do this?" in question.text
    await tg.press(OWNER, button(question, "Allow once"))
    assert (await tg.reply(OWNER)).text == "Done."
    assert posted == ["hi"] and tool_result(tg.llm.requests[1]).startswith("posted")
    assert await decisions(tg.app) == [("once", "post", OWNER)]
