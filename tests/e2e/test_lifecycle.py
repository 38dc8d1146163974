"""Errors, shutdown with messages in flight, webhook mode, and `sidekick run` under SIGTERM.

Restarting on the same data is covered in-process (test_basic, and the cancel test here).
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
from pathlib import Path

import aiohttp
import pytest

from bot.agent.prompt import without_context
from bot.agent.runner import Events, Incoming, Reply
from bot.app import build_app
from bot.errors import ConfigError
from bot.telegram.dispatcher import build_runtime
from bot.telegram.main import check_token, serve_webhook, webhook_secret
from bot.telegram.resume import continue_cut_turns, continuing_line
from tests.conftest import make_settings
from tests.e2e.conftest import OWNER, TG
from tests.fakes.openai_server import FakeOpenAI, Text
from tests.fakes.telegram_server import FakeTelegram, message_update

GENERIC = "Something went wrong on my side; the details are in the log. Please try again."


async def test_a_crash_in_a_handler_gives_a_short_message_and_the_bot_goes_on(tg: TG) -> None:
    real = tg.app.agent.handle

    async def boom(incoming: Incoming, events: Events | None = None) -> Reply:
        if incoming.text == "crash":
            raise RuntimeError(f"db at /secret/path failed, key {tg.settings.llm_api_key}")
        return await real(incoming, events)

    tg.app.agent.handle = boom  # type: ignore[method-assign]
    await tg.send(OWNER, "crash")
    assert (await tg.reply(OWNER)).text == GENERIC
    await tg.send(OWNER, "still there?")
    assert (await tg.reply(OWNER)).text == "echo: still there?"


async def test_shutdown_lets_a_message_in_flight_finish(tg: TG) -> None:
    tg.llm.add(Text("a slow but complete answer", chunk=2, delay=0.02))
    await tg.send(OWNER, "take your time")
    await tg.server.wait_for(lambda: bool(tg.server.drafts))  # the answer is streaming
    await tg.stop(grace=10)
    assert [m.text for m in tg.server.sent_to(OWNER)] == ["a slow but complete answer"]


async def test_shutdown_cancels_what_does_not_finish_and_restart_keeps_the_data(tg: TG) -> None:
    tg.llm.add(Text("x" * 400, chunk=1, delay=0.05))  # ~20 s: far beyond the grace period
    await tg.send(OWNER, "the stored question")
    await tg.server.wait_for(lambda: bool(tg.server.drafts))
    await tg.stop(grace=0.2)
    assert tg.server.sent_to(OWNER) == []
    await tg.start()
    # What `sidekick run` does at start, before new messages: the cut turn goes on.
    assert await continue_cut_turns(tg.runtime, tg.app.deps.clock()) == 1
    line, answer = await tg.replies(OWNER, 2)
    assert line.text == continuing_line("the stored question")
    assert answer.text.startswith("echo: ") and answer.text.endswith("the stored question")
    await tg.send(OWNER, "again")
    assert (await tg.reply(OWNER)).text == "echo: again"
    users = [
        without_context(m["content"])
        for m in tg.llm.requests[-1]["messages"]
        if m["role"] == "user"
    ]
    assert users == ["the stored question", "again"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_webhook_mode_checks_the_secret(
    tmp_path: Path, fake_llm: FakeOpenAI, telegram_server: FakeTelegram
) -> None:
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
    server = telegram_server
    await server.wait_for(lambda: any(c.method == "setWebhook" for c in server.calls))
    set_hook = next(c for c in server.calls if c.method == "setWebhook")
    secret = webhook_secret(settings)
    assert set_hook.params["url"] == "https://bot.example.com/tg/hook"
    assert set_hook.params["secret_token"] == secret
    assert any(c.method == "setMyCommands" for c in server.calls)
    url = f"http://127.0.0.1:{port}/tg/hook"
    async with aiohttp.ClientSession() as http:
        update = {"update_id": 1, **message_update(OWNER, "forged")}
        bad = {"X-Telegram-Bot-Api-Secret-Token": "wrong"}
        async with http.post(url, json=update, headers=bad) as resp:
            assert resp.status == 401
        update = {"update_id": 2, **message_update(OWNER, "via webhook")}
        good = {"X-Telegram-Bot-Api-Secret-Token": secret}
        async with http.post(url, json=update, headers=good) as resp:
            assert resp.status == 200
    await server.wait_for(lambda: bool(server.sent_to(OWNER)))
    assert [m.text for m in server.sent_to(OWNER)] == ["echo: via webhook"]
    stop.set()
    await serving
    await rt.shutdown()


async def test_sidekick_run_answers_and_stops_cleanly_on_sigterm(
    tmp_path: Path, fake_llm: FakeOpenAI, telegram_server: FakeTelegram
) -> None:
    server = telegram_server
    env = {
        **os.environ,
        "TELEGRAM_BOT_TOKEN": server.token,
        "TELEGRAM_API_URL": server.base_url,
        "ALLOWED_USER_IDS": str(OWNER),
        "LLM_BASE_URL": fake_llm.base_url,
        "LLM_API_KEY": "sk-test-secret-key-123456",
        "LLM_MODEL": "fake-model",
        "DATA_DIR": str(tmp_path / "data"),
    }

    async def run_once(text: str, sig: signal.Signals) -> tuple[int, str]:
        before = len(server.sent_to(OWNER))
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot", cwd=tmp_path, env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        try:
            await server.push(message_update(OWNER, text, message_id=before + 1))
            await server.wait_for(lambda: len(server.sent_to(OWNER)) > before, timeout=60)
            proc.send_signal(sig)
            _, err = await asyncio.wait_for(proc.communicate(), 30)
        finally:
            if proc.returncode is None:
                proc.kill()
                await proc.wait()
        assert proc.returncode is not None
        return proc.returncode, err.decode()

    code, log = await run_once("first run", signal.SIGTERM)
    assert code == 0, log
    assert "long polling mode" in log and "stopped" in log
    assert server.token not in log and "sk-test-secret-key-123456" not in log
    assert [m.text for m in server.sent_to(OWNER)] == ["echo: first run"]


async def test_a_rejected_token_is_one_clear_configuration_error(
    tmp_path: Path, fake_llm: FakeOpenAI, telegram_server: FakeTelegram
) -> None:
    settings = make_settings(
        tmp_path,
        fake_llm,
        telegram_bot_token="999999:not-the-right-token",
        telegram_api_url=telegram_server.base_url,
    )
    rt = build_runtime(await build_app(settings))
    try:
        with pytest.raises(ConfigError, match="TELEGRAM_BOT_TOKEN: Telegram rejected the token"):
            await check_token(rt)
    finally:
        await rt.shutdown()
    assert [c.status for c in telegram_server.calls] == [401]
