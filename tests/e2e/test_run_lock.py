"""One Sidekick per data folder, as an operator meets it: the bot started the way `make run`
starts it (the `sidekick` console script, whose command line names no module), then a
second `sidekick run`, `sidekick backup` and `sidekick restore --force` from another shell,
each the real CLI in a child process against the fake Telegram and model."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3
import sys
from pathlib import Path

from tests.conftest import sqlite_only
from tests.e2e.conftest import OWNER, WAIT_S
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram, message_update

ROOT = Path(__file__).resolve().parents[2]


def console_script(folder: Path) -> Path:
    """What pip writes as .venv/bin/sidekick: `python …/sidekick run` is the command line."""
    folder.mkdir()
    script = folder / "sidekick"
    script.write_text(
        f"#!{sys.executable}\nimport sys\nfrom bot.cli import main\nsys.exit(main())\n"
    )
    script.chmod(0o755)
    return script


async def cli(script: Path, env: dict[str, str], cwd: Path, *args: str) -> tuple[int, str]:
    proc = await asyncio.create_subprocess_exec(
        script, *args, cwd=cwd, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await asyncio.wait_for(proc.communicate(), WAIT_S)
    assert proc.returncode is not None
    return proc.returncode, out.decode()


def rows(db: Path, sql: str) -> list[tuple[object, ...]]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


@sqlite_only
async def test_one_sidekick_per_data_folder(
    tmp_path: Path, fake_llm: FakeOpenAI, telegram_server: FakeTelegram
) -> None:
    server = telegram_server
    home, data = tmp_path / "home", tmp_path / "home" / "data"
    home.mkdir()
    (home / ".env").write_text("# settings come from the environment here\n")
    script = console_script(tmp_path / "venv-bin")
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "TELEGRAM_BOT_TOKEN": server.token,
        "TELEGRAM_API_URL": server.base_url,
        "ALLOWED_USER_IDS": str(OWNER),
        "LLM_BASE_URL": fake_llm.base_url,
        "LLM_API_KEY": "sk-test-key-0123456789",
        "LLM_MODEL": "fake-model",
        "DATA_DIR": str(data),
        "DATABASE_URL": f"sqlite:///{data / 'sidekick.db'}",
    }
    bot = await asyncio.create_subprocess_exec(
        script, "run", cwd=home, env=env,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    try:
        await server.push(message_update(OWNER, "hello"))
        await server.wait_for(lambda: bool(server.sent_to(OWNER)), timeout=WAIT_S)
        # (`sidekick status` beside the running bot, and after its clean stop, is
        # test_status_logs.py's, on both databases: each call here is one more process.)

        # A second bot in the same folder: refused in one line, before it polls Telegram.
        starts = sum(c.method == "getMe" for c in server.calls)
        code, second = await cli(script, env, home, "run")
        assert code == 1, second
        refusal = [line for line in second.splitlines() if line.startswith("sidekick: ")]
        assert len(refusal) == 1 and f"pid {bot.pid}" in refusal[0], second
        assert "already uses the data folder" in refusal[0]
        assert "Traceback" not in second
        assert sum(c.method == "getMe" for c in server.calls) == starts

        code, made = await cli(script, env, home, "backup")
        assert code == 0, made
        archive = Path(made.split("backup written: ")[1].strip())

        # The bot goes on after the backup: the restore would drop this message.
        await server.push(message_update(OWNER, "after the backup"))
        await server.wait_for(lambda: len(server.sent_to(OWNER)) >= 2, timeout=WAIT_S)
        code, refused = await cli(script, env, home, "restore", str(archive), "--force")
        assert code == 1, refused
        assert f"pid {bot.pid}" in refused and "nothing was restored" in refused, refused
        texts = [t for (t,) in rows(data / "sidekick.db", "SELECT content FROM messages")]
        assert any("after the backup" in str(t) for t in texts)
        assert bot.returncode is None  # still serving, on the file it had
    finally:
        bot.send_signal(signal.SIGTERM)
        await asyncio.wait_for(bot.wait(), WAIT_S)

    # The stop let the folder go: the same restore is taken now.
    code, restored = await cli(script, env, home, "restore", str(archive), "--force")
    assert code == 0 and "restored" in restored, restored
    texts = [t for (t,) in rows(data / "sidekick.db", "SELECT content FROM messages")]
    assert not any("after the backup" in str(t) for t in texts)


async def test_a_bot_killed_hard_leaves_no_lock_behind(
    tmp_path: Path, fake_llm: FakeOpenAI, telegram_server: FakeTelegram
) -> None:
    server = telegram_server
    home, data = tmp_path / "home", tmp_path / "home" / "data"
    home.mkdir()
    (home / ".env").write_text("# settings come from the environment here\n")
    script = console_script(tmp_path / "venv-bin")
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "TELEGRAM_BOT_TOKEN": server.token,
        "TELEGRAM_API_URL": server.base_url,
        "ALLOWED_USER_IDS": str(OWNER),
        "LLM_BASE_URL": fake_llm.base_url,
        "LLM_MODEL": "fake-model",
        "DATA_DIR": str(data),
    }
    first = await asyncio.create_subprocess_exec(
        script, "run", cwd=home, env=env,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    await server.push(message_update(OWNER, "hello"))
    await server.wait_for(lambda: bool(server.sent_to(OWNER)), timeout=WAIT_S)
    first.kill()
    await first.wait()
    assert (data / "sidekick.lock").exists()  # left behind, and no obstacle
    code, status = await cli(script, env, home, "status")
    assert code == 0 and "not running" in status, status

    second = await asyncio.create_subprocess_exec(
        script, "run", cwd=home, env=env,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    try:
        await server.push(message_update(OWNER, "again"))
        await server.wait_for(lambda: len(server.sent_to(OWNER)) >= 2, timeout=WAIT_S)
        code, status = await cli(script, env, home, "status")
        assert code == 0 and f"pid {second.pid}" in status, status
    finally:
        second.send_signal(signal.SIGTERM)
        await asyncio.wait_for(second.wait(), WAIT_S)
