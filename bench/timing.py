"""What the in-process benchmarks (overhead.py, media.py) time: each handled update, and
the fake servers' own handler time, which is subtracted to leave the bot's own; the
process's RSS; and the assembled bot polling the fake Telegram, for the benches that drive
it."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

from aiogram import BaseMiddleware
from aiogram.types import TelegramObject
from aiohttp import web

import bot.telegram  # noqa: F401  (before aiogram, as in the bot: types built on first use)
from bot.telegram.dispatcher import SHUTDOWN_GRACE_S, Runtime
from tests.fakes.openai_server import FakeOpenAI, Turn
from tests.fakes.telegram_server import FakeTelegram

Span = tuple[float, float]


def rss_mb() -> float:
    """This process's resident memory now, in MB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


async def timed(spans: list[Span], call: Awaitable[Any]) -> Any:
    start = time.perf_counter()
    try:
        return await call
    finally:
        spans.append((start, time.perf_counter()))


class Timing(BaseMiddleware):
    """Records (start, end) of every handled update, inside the access check."""

    def __init__(self) -> None:
        self.spans: list[Span] = []

    async def __call__(
        self,
        handler: Callable[[TelegramObject, dict[str, Any]], Awaitable[Any]],
        event: TelegramObject,
        data: dict[str, Any],
    ) -> Any:
        return await timed(self.spans, handler(event, data))


class TimedLLM(FakeOpenAI):
    """The fake model (and transcription endpoint), recording its handlers' spans."""

    def __init__(self, responder: Callable[[dict[str, Any]], Turn]) -> None:
        super().__init__(responder=responder)
        self.spans: list[Span] = []

    async def _chat(self, request: Any) -> Any:
        return await timed(self.spans, super()._chat(request))

    async def _transcribe(self, request: web.Request) -> web.Response:
        return await timed(self.spans, super()._transcribe(request))


class TimedTelegram(FakeTelegram):
    """The fake Bot API, recording the spans of file downloads (its calls time themselves)."""

    def __init__(self) -> None:
        super().__init__()
        self.file_spans: list[Span] = []

    async def _file(self, request: web.Request) -> web.StreamResponse:
        return await timed(self.file_spans, super()._file(request))


@asynccontextmanager
async def polling(
    rt: Runtime, tg: FakeTelegram, poll_s: int, grace: float = SHUTDOWN_GRACE_S
) -> AsyncIterator[None]:
    """The bot polls the fake Telegram (as `sidekick run` does) from its first getUpdates
    on; at the end it shuts down with `grace` seconds to finish what it handles."""
    poll = asyncio.create_task(rt.poll(polling_timeout=poll_s))
    try:
        await tg.wait_for(lambda: any(c.method == "getUpdates" for c in tg.calls))
        yield
    finally:
        await rt.shutdown(grace)
        await asyncio.gather(poll, return_exceptions=True)
