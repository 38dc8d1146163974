"""Outages from the user's side: what they see and how late, with the default timings.

The assembled bot (build_app + build_runtime, polling) on the fake Telegram and the fake
model on 127.0.0.1, with the production retry timings (no test shortcuts):
1. the model answers HTTP 500 for `--model-outage` seconds while CHATS chats each send two
   messages (the second a few seconds later): when each user is told, how long after the
   model's return each answer comes, whether each chat's answers keep their order;
2. a stream that goes quiet for `--stall` seconds: when the "still waiting" line comes, and
   the answer;
3. Telegram answers 502 (getUpdates aside) for `--telegram-outage` seconds while each chat
   sends a message, /usage and another message: how long after Telegram's return each
   reply arrives, and in which order.

Usage: python bench/outages.py [--model-outage 30] [--stall 30] [--telegram-outage 30]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.cli import options
from bench.timing import polling
from bot.app import build_app
from bot.telegram.dispatcher import build_runtime
from tests.conftest import make_settings
from tests.fakes.openai_server import FakeOpenAI, Text
from tests.fakes.telegram_server import FakeTelegram, message_update

CHATS = [1001, 1002, 1003]


async def main(args: argparse.Namespace) -> None:
    tg, llm = await FakeTelegram().start(), await FakeOpenAI().start()
    settings = make_settings(
        Path(tempfile.mkdtemp()), llm,
        telegram_bot_token=tg.token, telegram_api_url=tg.base_url,
        allowed_user_ids=",".join(map(str, CHATS)),
    )  # fmt: skip
    rt = build_runtime(await build_app(settings))
    async with polling(rt, tg, poll_s=5, grace=2.0):
        await scenarios(tg, llm, args)
    await tg.stop()
    await llm.stop()


async def scenarios(tg: FakeTelegram, llm: FakeOpenAI, args: argparse.Namespace) -> None:
    ids = iter(range(1, 10_000))

    async def send(chat: int, text: str) -> None:
        await tg.push(message_update(chat, text, message_id=next(ids)))

    def at(chat: int, needle: str) -> float | None:
        return next((m.at for m in tg.sent_to(chat) if needle in m.text), None)

    # 1. the model fails for a while
    llm.failing = 500
    t0 = time.time()
    for chat in CHATS:
        await send(chat, f"first {chat}")
    await asyncio.sleep(5)
    for chat in CHATS:
        await send(chat, f"second {chat}")
    await asyncio.sleep(max(0.0, args.model_outage - (time.time() - t0)))
    llm.failing = None
    back = time.time()
    await tg.wait_for(lambda: all(at(c, f"echo: second {c}") for c in CHATS), 600)
    print(f"1. model HTTP 500 for {args.model_outage:g} s, {len(CHATS)} chats x 2 messages")
    for chat in CHATS:
        texts = [m.text for m in tg.sent_to(chat)]
        told = [t for t in texts if "not answering" in t]
        first, second = at(chat, f"echo: first {chat}"), at(chat, f"echo: second {chat}")
        assert first is not None and second is not None
        notice = at(chat, "not answering")
        print(
            f"   chat {chat}: told {len(told)}x at {(notice or t0) - t0:.1f} s; answers "
            f"{first - back:.1f} s and {second - back:.1f} s after the model's return; "
            f"in order: {first <= second}; messages: {len(texts)}"
        )

    # 2. a stream that goes quiet
    chat = CHATS[0]
    llm.add(Text("the late answer", pause=args.stall))
    t0 = time.time()
    await send(chat, "a slow one")
    await tg.wait_for(lambda: at(chat, "the late answer") is not None, 600)
    still, answer = at(chat, "Still waiting"), at(chat, "the late answer")
    assert answer is not None
    print(f"2. a stream silent for {args.stall:g} s: 'still waiting' at "
          f"{(still or t0) - t0:.1f} s, the answer at {answer - t0:.1f} s")  # fmt: skip

    # 3. Telegram fails for a while
    tg.down(502)
    t0 = time.time()
    for chat in CHATS:
        for text in (f"one {chat}", "/usage", f"two {chat}"):
            await send(chat, text)
    await asyncio.sleep(args.telegram_outage)
    before = {c: len(tg.sent_to(c)) for c in CHATS}
    tg.up()
    back = time.time()
    await tg.wait_for(lambda: all(at(c, f"echo: two {c}") for c in CHATS), 600)
    print(f"3. Telegram 502 for {args.telegram_outage:g} s, {len(CHATS)} chats x "
          "(message, /usage, message)")  # fmt: skip
    for chat in CHATS:
        new = tg.sent_to(chat)[before[chat] :]
        kinds = [m.text[:14] if m.method == "sendMessage" else m.method for m in new]
        print(f"   chat {chat}: {len(new)} replies, last {new[-1].at - back:.1f} s after "
              f"Telegram's return: {kinds}")  # fmt: skip


if __name__ == "__main__":
    args = options(__doc__, model_outage=30.0, stall=30.0, telegram_outage=30.0)
    logging.basicConfig(level=logging.ERROR)
    asyncio.run(main(args))
