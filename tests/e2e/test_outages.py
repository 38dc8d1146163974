"""Outages are waited out, not handed to the user, and a chat's replies keep its order.

- The model failing for a passing reason (HTTP 500 for a while): the user is told once that
  the provider is not answering, the message is answered when it is back, and a later
  message of the same chat is answered after it; past LLM_TIMEOUT_S, one final line.
- A stream that goes quiet: one "still waiting" line, then the answer.
- Telegram failing (502) for a while: every reply of the window (answers, a /memory and a
  /usage reply) arrives once it is back, within seconds, in each chat's order, and the log
  has no error for it.
"""

from __future__ import annotations

import logging

import pytest

from bot.llm.client import STILL_WAITING
from bot.telegram.routers.chat import NOT_READ
from tests.e2e.conftest import OWNER, TG
from tests.fakes.openai_server import Text

OTHER = 2000
NOTICE = "The model provider is not answering (HTTP 500) right now."


def texts(tg: TG, chat: int) -> list[str]:
    return [m.text for m in tg.server.sent_to(chat)]


async def telegram_down(tg: TG) -> None:
    """Telegram fails from now on, once the bot has started polling (a start during an
    outage is another story)."""
    await tg.server.wait_for(lambda: any(c.method == "getUpdates" for c in tg.server.calls))
    tg.server.down(502)


async def test_a_model_outage_is_waited_out_and_answered_in_order(tg: TG) -> None:
    tg.llm.failing = 500
    await tg.send(OWNER, "the first question")
    notice = await tg.reply(OWNER)
    assert notice.text.startswith(NOTICE), notice.text
    await tg.send(OWNER, "a second one, while it is down")
    failed = tg.llm.failed
    await tg.server.wait_for(lambda: tg.llm.failed >= failed + 5)  # still being tried
    assert texts(tg, OWNER) == [notice.text]  # nothing more in the meantime
    tg.llm.failing = None
    first, second = await tg.replies(OWNER, 2)
    assert (first.text, second.text) == (
        "echo: the first question",
        "echo: a second one, while it is down",
    )
    await tg.idle()
    assert len(texts(tg, OWNER)) == 3  # told once: no second notice, no error line


async def test_past_llm_timeout_the_user_gets_one_final_line(make_tg: object) -> None:
    # Long enough for the quick retries on a loaded machine, so the notice comes first.
    tg: TG = await make_tg(llm_timeout_s=6.0)  # type: ignore[operator]
    tg.llm.failing = 500
    await tg.send(OWNER, "anyone there?")
    notice, final = await tg.replies(OWNER, 2)
    assert notice.text.startswith(NOTICE)
    assert final.text == (
        "The model provider has still not answered after 6 s (HTTP 500), so I have stopped "
        "waiting. Please send your message again later."
    )
    tg.llm.failing = None
    await tg.send(OWNER, "and now?")
    assert (await tg.reply(OWNER)).text == "echo: and now?"


async def test_a_stalled_stream_says_it_is_still_waiting_then_answers(tg: TG) -> None:
    tg.client.stall_notice_s = 0.5
    tg.llm.add(Text("the answer after the pause", pause=3.0))
    await tg.send(OWNER, "a question the model is slow on")
    still, answer = await tg.replies(OWNER, 2)
    assert still.text == STILL_WAITING
    assert answer.text == "the answer after the pause"
    await tg.idle()
    assert len(texts(tg, OWNER)) == 2  # once
    assert len(tg.llm.requests) == 1  # waited for, not asked again


async def test_replies_queued_in_a_telegram_outage_arrive_after_it_in_each_chats_order(
    tg: TG, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    await telegram_down(tg)
    sticker = {"sticker": {"file_id": "s1", "file_unique_id": "s1", "width": 512,
                           "height": 512, "is_animated": False, "is_video": False,
                           "type": "regular"}}  # fmt: skip
    for chat, text in [(OWNER, "one"), (OTHER, "eins"), (OWNER, "/memory"), (OTHER, "/usage"),
                       (OWNER, None), (OWNER, "two"), (OTHER, "zwei")]:  # fmt: skip
        await tg.send(chat, text, **(sticker if text is None else {}))
    await tg.idle()  # every message was handled while Telegram was down
    assert tg.unread(OWNER) == [] and tg.unread(OTHER) == []
    tg.server.up()
    await tg.server.wait_for(lambda: "echo: two" in texts(tg, OWNER))
    await tg.server.wait_for(lambda: "echo: zwei" in texts(tg, OTHER))
    one, memory, not_read, two = tg.server.sent_to(OWNER)
    assert (one.text, two.text) == ("echo: one", "echo: two")
    assert not_read.text == NOT_READ  # a notice waits its turn like an answer
    assert memory.text and memory.reply_markup  # the /memory reply, its buttons too
    eins, chart, usage, zwei = tg.server.sent_to(OTHER)
    assert (eins.text, zwei.text) == ("echo: eins", "echo: zwei")
    assert chart.method == "sendPhoto" and "Today (" in usage.text  # /usage: chart, then text
    errors = [r for r in caplog.records if r.levelno >= logging.ERROR]
    assert errors == [], [r.getMessage() for r in errors]


async def test_a_newer_answer_waits_behind_a_queued_one(tg: TG) -> None:
    outbox = tg.runtime.outbox
    await telegram_down(tg)
    await outbox.stop()  # held still: the queued answer stays queued while Telegram is back
    await tg.send(OWNER, "asked while Telegram is down")
    await tg.idle()
    tg.server.up()
    await tg.send(OWNER, "asked once it is back")
    await tg.idle()
    assert tg.unread(OWNER) == []  # the newer answer did not overtake the queued one
    outbox.start()
    first, second = await tg.replies(OWNER, 2)
    assert (first.text, second.text) == (
        "echo: asked while Telegram is down",
        "echo: asked once it is back",
    )
