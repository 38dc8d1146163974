"""`sidekick status` and `sidekick logs` from another shell, beside a real `sidekick run`
on the fake Telegram and model: running since when, today's messages, the last answer,
then the log with secrets masked (`-f` follows it), and "not running" after it stopped."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.app import App
from bot.ops.status import print_status
from db.repos.core import get_or_create_user
from tests.e2e.conftest import OWNER, WAIT_S
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram, message_update
from tools.reminders.repo import add_job

KEY = "sk-test-secret-key-123456"


async def sidekick(env: dict[str, str], cwd: Path, *args: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", *args, cwd=cwd, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await asyncio.wait_for(proc.communicate(), WAIT_S)
    assert proc.returncode == 0, out.decode()
    return out.decode()


async def test_status_and_logs_beside_a_running_bot(
    tmp_path: Path, fake_llm: FakeOpenAI, telegram_server: FakeTelegram
) -> None:
    server = telegram_server
    data = tmp_path / "data"
    env = {
        **os.environ,
        "TELEGRAM_BOT_TOKEN": server.token,
        "TELEGRAM_API_URL": server.base_url,
        "ALLOWED_USER_IDS": str(OWNER),
        "LLM_BASE_URL": fake_llm.base_url,
        "LLM_API_KEY": KEY,
        "LLM_MODEL": "fake-model",
        "DATA_DIR": str(data),
    }
    (tmp_path / ".env").write_text("# settings come from the environment here\n")
    assert "not running" in await sidekick(env, tmp_path, "status")

    bot = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", "run", cwd=tmp_path, env=env,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    follow: asyncio.subprocess.Process | None = None
    try:
        await server.push(message_update(OWNER, "hello"))
        await server.wait_for(lambda: bool(server.sent_to(OWNER)), timeout=WAIT_S)
        await server.wait_for(lambda: (data / "sidekick.lock").exists(), timeout=WAIT_S)
        status = await sidekick(env, tmp_path, "status")
        assert f"running since {datetime.now(UTC):%Y-%m-%d}" in status
        assert f"pid {bot.pid}" in status
        assert "model:       fake-model at" in status and "last answer" in status
        assert "messages:    1 today" in status
        assert "deliveries:  0 waiting" in status and "reminders:   none active" in status
        assert "last backup: none" in status and "disk:        data folder" in status

        logs = await sidekick(env, tmp_path, "logs", "-n", "500")
        assert "long polling mode" in logs
        assert server.token not in logs and KEY not in logs

        follow = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot", "logs", "-f", "-n", "0", cwd=tmp_path, env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        )  # fmt: skip
        assert follow.stdout is not None
        # A line that holds a secret (written by hand, or before the key was a setting):
        # shown masked. Appended until the follower, which starts at the end, has shown it
        # (again each half second: the lines written before it started are not shown).
        seen = ""

        async def shows_it() -> None:
            nonlocal seen
            while "the key was [secret] here" not in seen:
                with (data / "sidekick.log").open("a") as log:
                    log.write(f"2026-01-01 00:00:00 INFO test: the key was {KEY} here\n")
                try:
                    line = await asyncio.wait_for(follow.stdout.readline(), 0.5)  # type: ignore[union-attr]
                except TimeoutError:
                    continue
                seen += line.decode()

        await asyncio.wait_for(shows_it(), WAIT_S)
        assert KEY not in seen
    finally:
        if follow is not None and follow.returncode is None:
            follow.kill()
            await follow.wait()
        bot.send_signal(signal.SIGTERM)
        await asyncio.wait_for(bot.wait(), WAIT_S)
    assert "not running" in await sidekick(env, tmp_path, "status")


async def test_status_lists_the_next_reminders(
    app: App, capsys: pytest.CaptureFixture[str]
) -> None:
    now = datetime.now(UTC)
    async with app.session_factory.begin() as s:
        user = await get_or_create_user(s, OWNER, "Ann", now)
        for hours, text in ((5, "water the plants"), (2, "call mom"), (9, "stretch")):
            at = now + timedelta(hours=hours)
            await add_job(s, user_id=user.id, kind="reminder", text=text, schedule="at",
                          timezone="UTC", first_at=at, next_run_at=at)  # fmt: skip
    await print_status(app.settings, now)
    out = capsys.readouterr().out
    assert "reminders:   3 active; next" in out
    assert out.index("call mom") < out.index("water the plants") < out.index("stretch")
    assert "messages:    0 today" in out and "no answer yet" in out
