"""Faults under load, as a user meets them (issue 45): an approval question Telegram cannot
take waits for it (it is not a no), and Telegram's 429 holds every send for as long as it
asked."""

from __future__ import annotations

from bot.approvals.gate import APPROVALS
from bot.telegram.resume import continue_cut_turns
from tests.e2e.conftest import OWNER, TG
from tests.e2e.test_approvals_e2e import (
    ask_to_post,
    button,
    decisions,
    tool_result,
    with_post_tool,
)
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


async def test_after_a_429_nothing_is_sent_before_the_time_telegram_asked(tg: TG) -> None:
    users = [2001, 2002, 2003, 2004, 2005]
    tg.server.fail_next("sendMessage", 429, retry_after=3)
    for user in users:
        tg.llm.add(Text(f"answer {user}"))
    await tg.send(users[0], "first")
    await tg.server.wait_for(lambda: any(c.status == 429 for c in tg.server.calls))
    for user in users[1:]:
        await tg.send(user, "meanwhile")
    for user in users:
        assert (await tg.reply(user)).text.startswith("answer ")
    [told] = [c for c in tg.server.calls if c.status == 429]
    sends = [c for c in tg.server.calls if c.method == "sendMessage" and c.at > told.at]
    after = [c.at - told.at for c in sends]
    assert len(after) == len(users)
    # By the fake's own clock: each arrived once the 3 s Telegram asked for had passed.
    assert min(after) >= 2.95, sorted(after)


async def test_during_a_429_hold_no_draft_or_typing_is_sent_either(tg: TG) -> None:
    """Telegram's flood control is per bot: drafts and "typing" during the hold would be
    refused too (and may lengthen it). The answer streams meanwhile; it is sent after."""
    tg.server.fail_next("sendMessage", 429, retry_after=3)
    tg.llm.add(Text("first answer"))
    await tg.send(2001, "first")
    await tg.server.wait_for(lambda: any(c.status == 429 for c in tg.server.calls))
    [told] = [c for c in tg.server.calls if c.status == 429]
    tg.llm.add(Text("a long answer that streams for a while " * 8, chunk=8, delay=0.05))
    await tg.send(2002, "meanwhile")
    assert (await tg.reply(2002)).text.startswith("a long answer")
    shown = ("sendMessageDraft", "sendChatAction", "setMessageReaction")
    early = [c.method for c in tg.server.calls if c.method in shown and 0 < c.at - told.at < 2.95]
    assert early == []


async def test_in_a_model_outage_a_second_message_gets_a_sign_that_it_is_held(tg: TG) -> None:
    tg.llm.failing = 500
    await tg.send(OWNER, "the first question")
    notice = await tg.reply(OWNER)
    assert notice.text.startswith("The model provider is not answering"), notice.text
    await tg.send(OWNER, "a second one, while it is down")
    failed = tg.llm.failed
    await tg.server.wait_for(lambda: bool(tg.server.reactions) or tg.llm.failed >= failed + 5)
    assert tg.server.reactions == [(OWNER, 2, ["👀"])]  # on the second message
    assert tg.unread(OWNER) == []  # a sign, not another line
    tg.llm.failing = None
    first, second = await tg.replies(OWNER, 2)
    assert (first.text, second.text) == (
        "echo: the first question",
        "echo: a second one, while it is down",
    )


async def test_a_shutdown_does_not_wait_for_an_approval_press(tg: TG) -> None:
    tg.app.part(APPROVALS).timeout_s = 3.0  # well inside the grace period below
    posted: list[str] = []
    with_post_tool(tg.app, posted)
    tg.on_build.append(lambda app: with_post_tool(app, posted))
    question = await ask_to_post(tg, "later")
    await tg.stop(grace=60.0)
    # The turn was cut at once: the question did not run out its time inside the grace
    # period, so the model never heard "no answer" and nothing was answered.
    assert len(tg.llm.requests) == 1 and tg.unread(OWNER) == []
    assert "I am restarting" in question.text
    await tg.start()
    tg.llm.script.clear()  # the first run's answer, never asked for
    tg.llm.add(Calls([("post", {"url": "https://example.org/x", "body": "later"})]), Text("Done."))
    await continue_cut_turns(tg.runtime, tg.app.deps.clock())
    continuing, again = await tg.replies(OWNER, 2)
    assert continuing.text.startswith("I was restarted while answering")
    await tg.press(OWNER, button(again, "Allow once"))
    assert (await tg.reply(OWNER)).text == "Done."
    assert posted == ["later"]
