"""Answers and messages are not lost to faults: an answer Telegram does not take during an
outage is kept and delivered when it is back, within seconds (sent only with Telegram's
message id; tests/e2e/test_outages.py has the chat order and command replies), and a
message a stop left unanswered gets one notice at the next start."""

from __future__ import annotations

import asyncio

from sqlalchemy import select

from bot.telegram.outbox import Outbox, restart_notice
from db.models.outbox import OutboxMessage
from tests.conftest import sqlite_only
from tests.e2e.conftest import OWNER, TG
from tests.fakes.openai_server import Error, Text


def outbox(tg: TG) -> Outbox:
    return Outbox(tg.runtime.bot, tg.app.session_factory, tg.app.deps.clock)


async def rows(tg: TG) -> list[OutboxMessage]:
    async with tg.app.session_factory() as s:
        return list((await s.execute(select(OutboxMessage).order_by(OutboxMessage.id))).scalars())


async def test_an_answer_during_a_telegram_outage_is_delivered_when_it_is_back(tg: TG) -> None:
    tg.server.fail_next("sendMessage", 502, times=3)  # the answer, then two tries of the outbox
    tg.llm.add(Text("the answer you waited for"))
    await tg.send(OWNER, "question during the outage")
    assert (await tg.reply(OWNER)).text == "the answer you waited for"
    sent = tg.server.sent_to(OWNER)[0]
    for _ in range(1200):  # a generous minute: the row is settled right after the send
        [row] = await rows(tg)
        if row.sent_at is not None:
            break
        await asyncio.sleep(0.05)
    assert row.kind == "answer" and row.attempts >= 2 and row.error is None
    assert row.message_id == sent.message_id  # sent only with Telegram's message id
    assert await tg.runtime.outbox.deliver() == 0  # sent once
    assert len(tg.server.sent_to(OWNER)) == 1


# On PostgreSQL the stop sometimes cuts the model's stream (an error the error line reports,
# which settles the message) before it cancels the turn: 1 full run in 3 asked about 0.
# Either way the user hears once; making the order fixed is open (see the stop's note).
@sqlite_only
async def test_a_message_left_unanswered_by_a_stop_gets_one_notice_at_start(tg: TG) -> None:
    await tg.send(OWNER, "an answered one")
    assert (await tg.reply(OWNER)).text == "echo: an answered one"
    tg.llm.add(Text("x" * 400, chunk=1, delay=0.05))  # far beyond the grace period
    await tg.send(OWNER, "the question cut off by the stop")
    await tg.server.wait_for(lambda: bool(tg.server.drafts))
    await tg.stop(grace=0.2)
    await tg.start()
    box = outbox(tg)
    assert await box.ask_about_unanswered(tg.app.deps.clock()) == 1
    assert await box.deliver() == 1
    expected = restart_notice("the question cut off by the stop")
    assert expected == (
        "Sorry — I was restarted before I could answer your message “the question cut off by "
        "the stop”; please send it again."
    )
    assert (await tg.reply(OWNER)).text == expected
    # A second start does not ask again, and answered messages were never asked about.
    assert await box.ask_about_unanswered(tg.app.deps.clock()) == 0
    assert await box.deliver() == 0


async def test_a_failed_turn_told_by_the_error_line_is_not_brought_up_again(tg: TG) -> None:
    tg.llm.add(Error(400, "refused"))  # the message is stored, then the model call fails
    await tg.send(OWNER, "this one fails")
    assert (await tg.reply(OWNER)).text.startswith("The model provider rejected")
    await tg.idle()
    assert await outbox(tg).ask_about_unanswered(tg.app.deps.clock()) == 0
