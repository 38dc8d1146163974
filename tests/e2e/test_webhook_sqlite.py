"""Webhook mode on SQLite: a replayed update id is answered once, a connection that never
completes its request is closed, and a bare WEBHOOK_LISTEN port binds loopback only."""

from __future__ import annotations

import asyncio
import gc
import logging
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from bot.app import build_app
from bot.telegram import main
from bot.telegram.dispatcher import Runtime, build_runtime
from bot.telegram.main import listen_address, serve_webhook, webhook_secret
from tests.conftest import make_settings
from tests.e2e.conftest import OWNER
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram, message_update


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    ("value", "address"),
    [
        ("8080", ("127.0.0.1", 8080)),
        (":8080", ("127.0.0.1", 8080)),
        ("0.0.0.0:8080", ("0.0.0.0", 8080)),
        ("10.0.0.5:9000", ("10.0.0.5", 9000)),
    ],
)
def test_a_bare_port_listens_on_loopback_only(value: str, address: tuple[str, int]) -> None:
    assert listen_address(value) == address


class Hook:
    def __init__(self, rt: Runtime, url: str, secret: str, server: FakeTelegram) -> None:
        self.rt, self.url, self.secret, self.server = rt, url, secret, server
        self.port = int(url.split(":")[2].split("/")[0])

    async def post(self, update: dict[str, object]) -> int:
        headers = {"X-Telegram-Bot-Api-Secret-Token": self.secret}
        async with (
            aiohttp.ClientSession() as http,
            http.post(self.url, json=update, headers=headers) as resp,
        ):
            return resp.status


@pytest.fixture
async def hook(
    tmp_path: Path, fake_llm: FakeOpenAI, telegram_server: FakeTelegram
) -> AsyncIterator[Hook]:
    port = free_port()
    settings = make_settings(
        tmp_path,
        fake_llm,
        telegram_bot_token=telegram_server.token,
        telegram_api_url=telegram_server.base_url,
        allowed_user_ids=str(OWNER),
        webhook_url="https://bot.example.com/tg/hook",
        webhook_listen=f"127.0.0.1:{port}",
    )
    rt = build_runtime(await build_app(settings))
    stop = asyncio.Event()
    serving = asyncio.create_task(serve_webhook(rt, stop))
    await telegram_server.wait_for(
        lambda: any(c.method == "setWebhook" for c in telegram_server.calls)
    )
    try:
        yield Hook(
            rt, f"http://127.0.0.1:{port}/tg/hook", webhook_secret(settings), telegram_server
        )
    finally:
        stop.set()
        await serving
        await rt.shutdown()


async def test_a_replayed_update_id_is_answered_once(hook: Hook) -> None:
    update = {"update_id": 7, **message_update(OWNER, "only once")}
    assert await hook.post(update) == 200
    await hook.server.wait_for(lambda: bool(hook.server.sent_to(OWNER)))
    assert await hook.post(update) == 200  # Telegram retries (it saw a timeout)
    assert await hook.post({"update_id": 8, **message_update(OWNER, "next")}) == 200
    await hook.server.wait_for(lambda: len(hook.server.sent_to(OWNER)) >= 2)
    await hook.rt.drain(10)
    assert [m.text for m in hook.server.sent_to(OWNER)] == ["echo: only once", "echo: next"]


@pytest.fixture
def short_idle(monkeypatch: pytest.MonkeyPatch) -> float:
    monkeypatch.setattr(main, "WEBHOOK_IDLE_S", 1.0, raising=False)
    return 1.0


async def test_a_half_open_connection_is_closed(short_idle: float, hook: Hook) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", hook.port)
    writer.write(b"POST /tg/hook HTTP/1.1\r\nHost: x\r\n")  # headers never finished
    await writer.drain()
    try:
        async with asyncio.timeout(short_idle + 30):  # generous: the machine may be loaded
            assert await reader.read() == b""  # closed by the server
    finally:
        writer.close()


async def test_a_malformed_update_is_skipped_without_its_text_in_the_log(
    hook: Hook, caplog: pytest.LogCaptureFixture
) -> None:
    bad = {"update_id": 9, **message_update(OWNER, "my bank PIN is 4711")}
    bad["message"]["date"] = "not a date"  # type: ignore[index]
    with caplog.at_level(logging.DEBUG):
        assert await hook.post(bad) == 200  # answered: Telegram would resend it otherwise
        assert await hook.post({"update_id": 10, **message_update(OWNER, "after it")}) == 200
        await hook.server.wait_for(lambda: bool(hook.server.sent_to(OWNER)))
        await hook.rt.drain(10)
        gc.collect()  # an unretrieved task exception would be logged now
    assert [m.text for m in hook.server.sent_to(OWNER)] == ["echo: after it"]
    assert "4711" not in caplog.text
    assert "skipped a malformed update: update_id 9" in caplog.text


async def test_a_lone_surrogate_through_the_webhook_is_replaced_not_skipped(hook: Hook) -> None:
    # pydantic's own JSON parser refuses "\ud83d" alone: the update was dropped as malformed.
    assert await hook.post({"update_id": 11, **message_update(OWNER, "half \ud83d")}) == 200
    await hook.server.wait_for(lambda: bool(hook.server.sent_to(OWNER)))
    await hook.rt.drain(10)
    assert [m.text for m in hook.server.sent_to(OWNER)] == ["echo: half \ufffd"]
