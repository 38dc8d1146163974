"""Answers are not lost to a Telegram outage: an answer Telegram does not take is kept and
delivered when it is back, within seconds (sent only with Telegram's message id;
tests/e2e/test_outages.py has the chat order and command replies). Messages a stop left
unanswered are continued at the next start: test_resume.py."""

from __future__ import annotations

import asyncio

from sqlalchemy import select

from bot.telegram.outbox import Outbox
from db.models.outbox import OutboxMessage
from tests.e2e.conftest import OWNER, TG
from tests.fakes.openai_server import Text


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
