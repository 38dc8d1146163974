"""Two workers (two Apps and Dispatchers) on one PostgreSQL database, fed like a load
balancer feeds webhook workers: every update reaches both, interleaved; each is answered
once and each chat's answers come in order. A worker killed mid-turn leaves the chat to the
other one."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from aiogram.types import Update
from sqlalchemy import func, select

from bot.app import build_app
from bot.llm.client import LLMClient
from bot.telegram.dispatcher import Runtime, build_runtime
from db.models.inbox import TelegramUpdate
from tests.conftest import make_settings, pg_only
from tests.e2e.conftest import ALLOWED
from tests.fakes.openai_server import FakeOpenAI, Text
from tests.fakes.telegram_server import FakeTelegram, message_update

# Two apps built on PostgreSQL (migrations) and 150 turns: on a loaded machine more than
# pytest's default 120 s for a whole test, set-up included, while the waits inside are
# bounded on their own.
pytestmark = [pg_only, pytest.mark.timeout(600)]


@dataclass
class Clock:
    now: datetime = field(default_factory=lambda: datetime(2026, 3, 1, 12, 0, tzinfo=UTC))

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
async def workers(
    tmp_path: Path, fake_llm: FakeOpenAI, telegram_server: FakeTelegram
) -> AsyncIterator[tuple[list[Runtime], Clock]]:
    settings = make_settings(
        tmp_path, fake_llm,
        telegram_bot_token=telegram_server.token, telegram_api_url=telegram_server.base_url,
        allowed_user_ids=",".join(map(str, ALLOWED)),
    )  # fmt: skip
    clock = Clock()
    rts = []
    for _ in range(2):
        llm = LLMClient(settings, retry_base_delay=0.01, retry_max_delay=0.05)
        rts.append(build_runtime(await build_app(settings, clock=clock, llm=llm)))
    yield rts, clock
    for rt in rts:
        await rt.shutdown(2.0)


async def feed(rt: Runtime, raw: dict[str, Any]) -> None:
    await rt.dp.feed_update(rt.bot, Update.model_validate(raw, context={"bot": rt.bot}))


async def claimed(rt: Runtime) -> int:
    async with rt.app.session_factory() as s:
        return int((await s.execute(select(func.count()).select_from(TelegramUpdate))).scalar())


async def test_fifty_chats_each_update_twice_answered_once_in_order(
    workers: tuple[list[Runtime], Clock], telegram_server: FakeTelegram
) -> None:
    rts, _ = workers
    chats = ALLOWED[1:51]
    rng = random.Random(16)
    next_id, tasks = 1, []
    for k in range(3):
        deliveries = []
        for chat in chats:
            raw = {
                **message_update(chat, f"m{k} of {chat}", message_id=k + 1),
                "update_id": next_id,
            }
            next_id += 1
            deliveries += [(rts[0], raw), (rts[1], raw)]  # the retry lands on the other worker
        rng.shuffle(deliveries)
        tasks += [asyncio.create_task(feed(rt, raw)) for rt, raw in deliveries]
        # Telegram sends update k+1 of a chat after update k was accepted (claimed).
        async with asyncio.timeout(30):
            while await claimed(rts[0]) < next_id - 1:  # noqa: ASYNC110 - state in the database
                await asyncio.sleep(0.01)
    await asyncio.wait_for(asyncio.gather(*tasks), 120)
    for chat in chats:
        texts = [m.text for m in telegram_server.sent_to(chat)]
        assert texts == [f"echo: m{k} of {chat}" for k in range(3)], (chat, texts)


async def test_a_worker_killed_mid_turn_leaves_the_chat_to_the_other(
    workers: tuple[list[Runtime], Clock], telegram_server: FakeTelegram, fake_llm: FakeOpenAI
) -> None:
    rts, clock = workers
    chat = ALLOWED[1]
    first = {**message_update(chat, "first", message_id=1), "update_id": 1}
    turn = asyncio.create_task(feed(rts[0], first))
    async with asyncio.timeout(30):
        while await claimed(rts[1]) < 1:  # noqa: ASYNC110 - state in the database
            await asyncio.sleep(0.01)
    turn.cancel()  # the worker dies mid-turn: its task ends, its lock connection goes
    await asyncio.gather(turn, return_exceptions=True)
    await rts[0].locks.close()
    clock.now += timedelta(minutes=3)  # its unfinished claim counts as abandoned now
    fake_llm.responder = lambda body: Text("served by the other worker")
    second = {**message_update(chat, "second", message_id=2), "update_id": 2}
    await asyncio.wait_for(feed(rts[1], second), 30)
    await asyncio.wait_for(feed(rts[1], first), 30)  # Telegram's retry of the lost one: taken
    assert [m.text for m in telegram_server.sent_to(chat)][-1] == "served by the other worker"
    assert sum(m.text == "served by the other worker" for m in telegram_server.sent_to(chat)) == 1
