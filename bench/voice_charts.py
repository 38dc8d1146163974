"""Voice replies and charts, measured over the fake servers on 127.0.0.1.

1. voice: N voice notes, each answered with a 400-character text; the time from the
   answer's last token (the fake model server finished its stream) to the voice message
   sent (the fake Bot API answered sendVoice): p50, p95. The fake speech endpoint answers
   at once, so this is the bot's own path: mode lookup, budget check, the speech request,
   the usage row, sendVoice.
2. charts: process RSS before and after the first chart (matplotlib's import is in it),
   the first render and the p50 of the next ones (14 days x 4 purposes).

Usage: python bench/voice_charts.py [--items 30]
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from aiohttp import web

import bot.telegram  # noqa: F401  (before aiogram, as in the bot)
from bench.cli import options
from bench.timing import polling, rss_mb
from bot import heap
from bot.app import build_app
from bot.config import load_settings
from bot.telegram.dispatcher import build_runtime
from tests.fakes.openai_server import FakeOpenAI, Text
from tests.fakes.telegram_server import FakeTelegram, message_update
from tests.media_helpers import voice
from tools.charts import chart, usage_series

ANSWER = "The weather is mild today, with a light breeze from the west. " * 6


class StampedLLM(FakeOpenAI):
    done: list[float]

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        resp = await super()._chat(request)
        self.done.append(time.perf_counter())  # the stream's last byte is written
        return resp


async def run(items: int) -> None:
    heap.one_arena()  # as bot/cli.py does at start
    tg = await FakeTelegram().start()
    llm = StampedLLM(responder=lambda body: Text(ANSWER, chunk=40))
    llm.done = []
    await llm.start()
    sent: list[float] = []
    original = tg._m_sendVoice

    async def stamped(params: dict[str, Any], files: dict[str, Any]) -> Any:
        out = await original(params, files)
        sent.append(time.perf_counter())
        return out

    tg._m_sendVoice = stamped  # type: ignore[method-assign]
    with tempfile.TemporaryDirectory() as tmp:
        settings = load_settings(
            data_dir=Path(tmp), telegram_bot_token=tg.token, telegram_api_url=tg.base_url,
            allowed_user_ids="1000", llm_base_url=llm.base_url, llm_api_key="sk-bench",
            llm_model="fake-model",
        )  # fmt: skip
        app = await build_app(settings)
        rt = build_runtime(app)
        async with polling(rt, tg, poll_s=10, grace=10):
            ogg = tg.add_file(b"OggS" + bytes(20 * 1024))
            lat: list[float] = []
            for i in range(items + 3):
                await tg.push(message_update(1000, None, message_id=i + 1, extra=voice(ogg, 20484)))
                await tg.wait_for(lambda n=i: len(sent) > n, timeout=30)
                if i >= 3:  # warm-up excluded
                    lat.append((sent[i] - llm.done[i]) * 1000)
            lat.sort()
            p50, p95 = statistics.median(lat), lat[int(0.95 * (len(lat) - 1))]
            print(f"voice: {items} replies, last token -> voice sent: p50 {p50:.1f} ms, "
                  f"p95 {p95:.1f} ms")  # fmt: skip

            now = app.deps.clock()
            purposes = ["chat", "archive", "code", "speech"]
            rows = [(now - timedelta(days=d, hours=h), p, 1000 + 37 * d, 0.001 * (h + 1))
                    for d in range(14) for h in range(4) for p in purposes]  # fmt: skip
            series = usage_series(rows, now, settings.tz, 14)
            before = rss_mb()
            t0 = time.perf_counter()
            png = await chart(series)
            first = (time.perf_counter() - t0) * 1000
            after = rss_mb()
            again = []
            for _ in range(10):
                t0 = time.perf_counter()
                await chart(series)
                again.append((time.perf_counter() - t0) * 1000)
            assert png is not None
            print(f"charts: RSS {before:.1f} MB before the first chart, {after:.1f} MB after "
                  f"(+{after - before:.1f}); first render {first:.0f} ms (import included), "
                  f"next ones p50 {statistics.median(again):.0f} ms; PNG {len(png) / 1024:.0f} KB;"
                  f" RSS after 11 charts {rss_mb():.1f} MB")  # fmt: skip
    await llm.stop()
    await tg.stop()


if __name__ == "__main__":
    asyncio.run(run(options(__doc__, items=30).items))
