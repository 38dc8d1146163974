"""The dashboard behind the webhook's server: with WEBHOOK_URL set, DASHBOARD=on serves its
pages from the webhook's own listener (the HTTPS reverse proxy that reaches the bot reaches
them too), at WEBHOOK_URL's origin; the webhook goes on answering updates."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from bot.app import build_app
from bot.telegram.dispatcher import Runtime, build_runtime
from bot.telegram.main import serve_webhook, start, webhook_secret
from tests.conftest import make_settings
from tests.e2e.conftest import OWNER
from tests.e2e.test_webhook_sqlite import free_port
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram, message_update

ORIGIN = "https://bot.example.com"


class Served:
    def __init__(self, rt: Runtime, port: int, secret: str, server: FakeTelegram) -> None:
        self.rt, self.port, self.secret, self.server = rt, port, secret, server
        self.base = f"http://127.0.0.1:{port}"
        self.updates = 0

    async def say(self, text: str) -> None:
        self.updates += 1
        update = {"update_id": self.updates, **message_update(OWNER, text)}
        headers = {"X-Telegram-Bot-Api-Secret-Token": self.secret}
        async with aiohttp.ClientSession() as http:
            async with http.post(f"{self.base}/tg/hook", json=update, headers=headers) as r:
                assert r.status == 200

    async def answer(self, n: int) -> str:
        await self.server.wait_for(lambda: len(self.server.sent_to(OWNER)) >= n)
        return self.server.sent_to(OWNER)[n - 1].text


@pytest.fixture
async def served(
    tmp_path: Path, fake_llm: FakeOpenAI, telegram_server: FakeTelegram
) -> AsyncIterator[Served]:
    port = free_port()
    settings = make_settings(
        tmp_path,
        fake_llm,
        telegram_bot_token=telegram_server.token,
        telegram_api_url=telegram_server.base_url,
        allowed_user_ids=str(OWNER),
        webhook_url=f"{ORIGIN}/tg/hook",
        webhook_listen=f"127.0.0.1:{port}",
        dashboard="on",
    )
    rt = build_runtime(await build_app(settings))
    await start(rt)  # as `sidekick run` does before it takes updates
    stop = asyncio.Event()
    serving = asyncio.create_task(serve_webhook(rt, stop))
    await telegram_server.wait_for(
        lambda: any(c.method == "setWebhook" for c in telegram_server.calls)
    )
    try:
        yield Served(rt, port, webhook_secret(settings), telegram_server)
    finally:
        stop.set()
        await serving
        await rt.shutdown()


async def test_the_dashboard_is_served_by_the_webhooks_server(served: Served) -> None:
    # The menu opens the Mini App at the webhook's https origin.
    assert served.server.menu_button == {
        "type": "web_app",
        "text": "Dashboard",
        "web_app": {"url": f"{ORIGIN}/miniapp"},
    }
    await served.say("/dashboard")
    link = re.search(rf"{ORIGIN}/login\?t=(\S+)", await served.answer(1))
    assert link is not None
    async with aiohttp.ClientSession() as http:
        # The link's page and the sign-in answer on the webhook's own port.
        async with http.get(f"{served.base}/login", params={"t": link[1]}) as page:
            assert page.status == 200 and "Sign in" in await page.text()
        form = {"t": link[1]}
        async with http.post(f"{served.base}/login", data=form, allow_redirects=False) as r:
            assert r.status == 303
            session = r.cookies["sidekick_dashboard"]
            assert session["secure"] and session["httponly"]  # an https origin
        headers = {"Cookie": f"sidekick_dashboard={session.value}"}
        async with http.get(f"{served.base}/", headers=headers) as today:
            assert today.status == 200 and "Today" in await today.text()
            assert today.headers["Content-Security-Policy"]  # the dashboard's guard ran
        # A dashboard write without its CSRF token is refused here too.
        async with http.post(f"{served.base}/reminders", headers=headers, data={}) as bad:
            assert bad.status == 403
    # And the webhook still answers the chat.
    await served.say("still there?")
    assert await served.answer(2) == "echo: still there?"
