"""Answers are not lost to a Telegram outage: an answer Telegram does not take is kept and
delivered when it is back (sent only with Telegram's message id). Messages a stop left
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


async def wait_rows(tg: TG, n: int) -> list[OutboxMessage]:
    for _ in range(1200):  # a generous minute: the retries before queueing take seconds
        if len(found := await rows(tg)) >= n:
            return found
        await asyncio.sleep(0.05)
    raise AssertionError(f"no {n} outbox row(s) within a minute")


async def test_an_answer_during_a_telegram_outage_is_delivered_when_it_is_back(tg: TG) -> None:
    tg.server.fail_next("sendMessage", 502, times=5)  # every retry of the answer fails
    tg.llm.add(Text("the answer you waited for"))
    await tg.send(OWNER, "question during the outage")
    [row] = await wait_rows(tg, 1)
    await tg.idle()
    assert row.kind == "answer" and row.sent_at is None and row.message_id is None
    assert tg.server.sent_to(OWNER) == []  # nothing arrived, nothing claims it did
    tg.server.fail_next("sendMessage", 502)  # still down at the first try of the outbox
    assert await outbox(tg).deliver() == 0
    [row] = await rows(tg)
    assert (row.sent_at, row.attempts) == (None, 1)
    assert row.deliver_after > row.created_at  # the next try waits for the next tick
    async with tg.app.session_factory() as s, s.begin():  # ... which has come
        due = await s.get(OutboxMessage, row.id)
        assert due is not None
        due.deliver_after = row.created_at
    assert await outbox(tg).deliver() == 1  # Telegram is back
    assert [m.text for m in tg.server.sent_to(OWNER)] == ["the answer you waited for"]
    [row] = await rows(tg)
    assert row.message_id == tg.server.sent_to(OWNER)[0].message_id
    assert await outbox(tg).deliver() == 0  # sent once
