"""End-to-end harness: the real App + aiogram Dispatcher polling a fake Telegram server.

Fixtures
    tg        a running bot (default settings), owner user id `tg.owner` (= OWNER, 1001);
              user ids 2000..2099 are allowed too, 666 (STRANGER) is not.
    make_tg   `await make_tg(**settings_overrides)` for custom settings (SEARXNG_URL=...).

The `TG` object
    tg.server / tg.llm / tg.app / tg.settings: the fake Telegram (tests/fakes/telegram_server.py),
        the fake model (tests/fakes/openai_server.py), the live App and its Settings.
    tg.client: the app's LLMClient (bot/llm/client.py), e.g. to shorten its stall notice.
    await tg.send(user_id, text, chat_id=None) -> update_id; a negative chat_id is a group.
    await tg.send_update(update) pushes any raw update dict (without update_id).
    await tg.press(user_id, data, message_id=None, chat_id=None): a callback_query on one of
        the bot's messages (default: the newest one in that chat that has a reply_markup).
    await tg.replies(chat_id, n=1, timeout=WAIT_S) -> the next n messages the bot sent to that
        chat (a cursor per chat advances; each message is returned once). TimeoutError if
        fewer arrive.
    await tg.reply(chat_id) -> the next single message (tests.fakes.telegram_server.Sent:
        .text, .entities, .reply_markup, .document, .filename, .message_id).
    await tg.idle(timeout=WAIT_S): every pushed update was fetched and fully handled (use it
        before asserting that something did NOT happen).
    await tg.restart(**overrides): stop the bot like SIGTERM does (drain, close the App), build
        a new App + Dispatcher on the same DATA_DIR and start polling again.
    tg.runtime: bot.telegram.dispatcher.Runtime (app, bot, dp, inflight).
    tg.on_build: list of callbacks `fn(app)` run on every (re)build, before polling starts,
        e.g. to swap in a registry with test tools: tg.on_build.append(lambda a: ...).

Waiting is always event-driven (conditions on the fake server); there are no sleeps.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from bot.app import App, build_app
from bot.config import Settings
from bot.llm.client import LLMClient
from bot.telegram.dispatcher import Runtime, build_runtime
from tests.conftest import make_settings
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram, Sent, callback_update, message_update
from tools.base import Clock, system_clock

OWNER = 1001
# Every wait is event-driven: this only bounds a hang, so it is generous (a loaded machine
# takes seconds for what takes milliseconds alone).
WAIT_S = 60.0
STRANGER = 666
ALLOWED = [OWNER, *range(2000, 2100)]


class TG:
    def __init__(self, server: FakeTelegram, llm: FakeOpenAI, settings: Settings) -> None:
        self.server = server
        self.llm = llm
        self.settings = settings
        self.owner = OWNER
        self.on_build: list[Callable[[App], Any]] = []
        self.draft_interval = 0.05
        self.album_window = 0.3  # albums arrive in one getUpdates batch here
        self.clock: Clock = system_clock  # the app's (tests/real fixes it: see there)
        self._runtime: Runtime | None = None
        self._poll: asyncio.Task[None] | None = None
        self._cursor: dict[int, int] = {}
        self._message_ids: dict[int, int] = {}

    @property
    def runtime(self) -> Runtime:
        assert self._runtime is not None, "the bot is not running"
        return self._runtime

    @property
    def app(self) -> App:
        return self.runtime.app

    async def start(self) -> TG:
        llm = LLMClient(self.settings, retry_base_delay=0.01, retry_max_delay=0.05)
        self.client = llm  # the model client under the app's wrappers (test-time knobs)
        app = await build_app(self.settings, llm=llm, clock=self.clock)
        for fn in self.on_build:
            result = fn(app)
            if isinstance(result, Awaitable):
                await result
        self._runtime = build_runtime(
            app, draft_interval=self.draft_interval, album_window=self.album_window
        )
        self._poll = asyncio.create_task(self._runtime.poll(polling_timeout=5))
        return self

    async def stop(self, grace: float = 10.0) -> None:
        if self._runtime is not None:
            await self._runtime.shutdown(grace)
            self._runtime = None
        if self._poll is not None:
            await asyncio.gather(self._poll, return_exceptions=True)
            self._poll = None

    async def restart(self, **overrides: Any) -> None:
        await self.stop()
        if overrides:
            self.settings = self.settings.model_copy(update=overrides)
        await self.start()

    async def send_update(self, update: dict[str, Any]) -> int:
        return await self.server.push(update)

    async def send(self, user_id: int, text: str | None, chat_id: int | None = None,
                   **extra: Any) -> int:  # fmt: skip
        chat = user_id if chat_id is None else chat_id
        self._message_ids[chat] = self._message_ids.get(chat, 0) + 1
        update = message_update(
            user_id, text, chat_id=chat_id, message_id=self._message_ids[chat], extra=extra
        )
        return await self.server.push(update)

    async def press(self, user_id: int, data: str, message_id: int | None = None,
                    chat_id: int | None = None) -> int:  # fmt: skip
        chat = user_id if chat_id is None else chat_id
        sent = self.server.sent_to(chat)
        if message_id is None:
            with_buttons = [m for m in sent if m.reply_markup]
            assert with_buttons, f"no message with buttons in chat {chat}"
            target = with_buttons[-1]
        else:
            target = next(m for m in sent if m.message_id == message_id)
        chat_obj = {"id": chat, "type": "private" if chat > 0 else "supergroup"}
        message: dict[str, Any] = {
            "message_id": target.message_id,
            "date": int(target.at),
            "chat": chat_obj,
            "from": {"id": self.server.bot_id, "is_bot": True, "first_name": "Sidekick"},
            "text": target.text or "-",
        }
        if target.reply_markup:
            message["reply_markup"] = target.reply_markup
        query_id = f"cb{len(self.server.calls)}"
        return await self.server.push(callback_update(user_id, data, message, query_id=query_id))

    async def replies(self, chat_id: int, n: int = 1, timeout: float = WAIT_S) -> list[Sent]:  # noqa: ASYNC109
        start = self._cursor.get(chat_id, 0)
        await self.server.wait_for(lambda: len(self.server.sent_to(chat_id)) >= start + n, timeout)
        self._cursor[chat_id] = start + n
        return self.server.sent_to(chat_id)[start : start + n]

    async def reply(self, chat_id: int, timeout: float = WAIT_S) -> Sent:  # noqa: ASYNC109
        return (await self.replies(chat_id, 1, timeout))[0]

    def unread(self, chat_id: int) -> list[Sent]:
        """Messages sent to the chat that no replies() call returned yet."""
        return self.server.sent_to(chat_id)[self._cursor.get(chat_id, 0) :]

    async def idle(self, timeout: float = WAIT_S) -> None:  # noqa: ASYNC109
        await self.server.wait_for(self.server.all_confirmed, timeout)
        # The confirming getUpdates is sent after polling created the handler tasks;
        # yield once so the newest task registers itself, then wait for all of them.
        await asyncio.sleep(0)
        rt = self.runtime
        tasks = set(rt.inflight.tasks)
        if tasks:
            await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), timeout)
        await asyncio.wait_for(rt.inflight.wait_idle(), timeout)


@pytest.fixture
async def telegram_server() -> AsyncIterator[FakeTelegram]:
    server = await FakeTelegram().start()
    yield server
    await server.stop()


@pytest.fixture
async def make_tg(
    tmp_path: Path, fake_llm: FakeOpenAI, telegram_server: FakeTelegram
) -> AsyncIterator[Callable[..., Awaitable[TG]]]:
    started: list[TG] = []

    async def make(**overrides: Any) -> TG:
        values: dict[str, Any] = {
            "telegram_bot_token": telegram_server.token,
            "telegram_api_url": telegram_server.base_url,
            "allowed_user_ids": ",".join(map(str, ALLOWED)),
            **overrides,
        }
        tg = TG(telegram_server, fake_llm, make_settings(tmp_path, fake_llm, **values))
        started.append(tg)
        return await tg.start()

    yield make
    for tg in started:
        await tg.stop(grace=2.0)


@pytest.fixture
async def tg(make_tg: Callable[..., Awaitable[TG]]) -> TG:
    return await make_tg()
