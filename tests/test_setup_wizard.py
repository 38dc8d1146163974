"""`sidekick setup` driven through a pseudo-terminal, as a person over SSH would: the real
`python -m bot.cli setup` child process against the fake Telegram, model and search
servers on loopback. The token is checked with getMe, the model endpoint's models are
offered, .env is written mode 600 keeping its other lines, and no secret is ever echoed."""

from __future__ import annotations

import asyncio
import os
import re
import select
import signal
import socket
import stat
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.ops.envfile import read_env
from tests.child import interruptible
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.search_server import FakeSearch, Reply, fixture
from tests.fakes.telegram_server import FakeTelegram

ROOT = Path(__file__).resolve().parents[1]
WAIT_S = 60.0
KEY = "sk-wizard-secret-key-0123456789"


class Terminal:
    """A child process on a pty: `expect` waits for text on its screen, `type` a line."""

    def __init__(self, cwd: Path, *args: str) -> None:
        self.master, slave = os.openpty()
        env = {**os.environ, "PYTHONPATH": str(ROOT), "SIDEKICK_HOME": str(cwd)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bot.cli", *args],
            stdin=slave, stdout=slave, stderr=slave, cwd=cwd, env=env, start_new_session=True,
            preexec_fn=interruptible,
        )  # fmt: skip
        os.close(slave)
        self.screen = ""
        self._seen = 0

    def _read(self, timeout: float) -> bool:
        ready, _, _ = select.select([self.master], [], [], timeout)
        if not ready:
            return True
        try:
            chunk = os.read(self.master, 4096)
        except OSError:  # the child closed the terminal
            return False
        self.screen += chunk.decode("utf-8", "replace")
        return bool(chunk)

    async def expect(self, pattern: str) -> str:
        """Waits (polling, generous deadline) for the pattern after what was matched last."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + WAIT_S
        while True:
            m = re.compile(pattern).search(self.screen, self._seen)
            if m:
                self._seen = m.end()
                return m.group(0)
            if loop.time() > deadline:
                raise TimeoutError(f"{pattern!r} not on the screen:\n{self.screen[-2000:]}")
            alive = await asyncio.to_thread(self._read, 0.2)
            if not alive and not re.compile(pattern).search(self.screen, self._seen):
                raise EOFError(f"the child ended before {pattern!r}:\n{self.screen[-2000:]}")

    def type(self, line: str) -> None:
        os.write(self.master, (line + "\r").encode())

    async def interrupt(self) -> int:
        """Ctrl-C until the child ends, as a person presses it again: one that lands between
        the prompt being written and the read starting is seen only by the next read (the
        read blocks first), which under load happens. Once the child answers a press (it
        writes that setup stopped) no more are pressed: one landing while it exits would kill
        it by the signal (-2) instead of its own 130. The exit status."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + WAIT_S
        seen = len(self.screen)
        while self.proc.poll() is None and loop.time() < deadline and len(self.screen) == seen:
            os.kill(self.proc.pid, signal.SIGINT)
            pressed = loop.time()
            while self.proc.poll() is None and loop.time() < pressed + 1.0:
                await asyncio.to_thread(self._read, 0.1)
                if len(self.screen) > seen:
                    break
        return await self.ended()

    async def ended(self) -> int:
        """Reads the screen to the end (the child's exit closes it); the exit status."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + WAIT_S
        while await asyncio.to_thread(self._read, 0.2) and loop.time() < deadline:
            pass
        os.close(self.master)
        return await asyncio.to_thread(self.proc.wait, WAIT_S)


@pytest.fixture
async def telegram() -> AsyncIterator[FakeTelegram]:
    server = await FakeTelegram().start()
    yield server
    await server.stop()


@pytest.fixture
async def searxng() -> AsyncIterator[FakeSearch]:
    fake = await FakeSearch().start()
    fake.serve("/search", Reply(fixture("searxng_web.json")))
    yield fake
    await fake.stop()


async def test_first_setup_checks_each_answer_and_writes_env(
    tmp_path: Path, telegram: FakeTelegram, fake_llm: FakeOpenAI
) -> None:
    fake_llm.models = ["big-model", "fake-model"]
    env = tmp_path / ".env"
    env.write_text(f"# my notes\nTELEGRAM_API_URL={telegram.base_url}\nTIMEZONE=Europe/Paris\n")
    term = Terminal(tmp_path, "setup")
    await term.expect(r"Bot token: ")
    term.type("123456789:AAE-wrong-token-for-tests-00000000000")
    await term.expect(r"not ok: Telegram refused it")
    await term.expect(r"Bot token: ")
    term.type(telegram.token)
    await term.expect(r"ok: this is your bot @sidekick_test_bot")
    await term.expect(r"5\) another OpenAI-compatible URL")
    await term.expect(r"Choose 1-5 \[1\]: ")
    term.type("4")  # llama.cpp: the URL is asked, the key is optional
    await term.expect(r"Endpoint URL \(ending in /v1\) \[http://localhost:8080/v1\]: ")
    term.type(fake_llm.base_url)
    await term.expect(r"API key \(Enter: none\): ")
    term.type(KEY)
    await term.expect(r"ok: 2 models")
    await term.expect(r"2\) fake-model")
    await term.expect(r"Model \(number or name\) \[big-model\]: ")
    term.type("2")
    await term.expect(r"ok: fake-model")
    await term.expect(r"Owner \[learn\]: ")
    term.type("4242")
    await term.expect(r"Choose 1-3 \[keep\]: ")
    term.type("3")
    await term.expect(r"Done\.")
    assert await term.ended() == 0

    written = read_env(env)
    assert written["TELEGRAM_BOT_TOKEN"] == telegram.token
    assert written["LLM_BASE_URL"] == fake_llm.base_url
    assert written["LLM_API_KEY"] == KEY and written["LLM_MODEL"] == "fake-model"
    assert written["ALLOWED_USER_IDS"] == "4242"
    text = env.read_text()
    assert text.startswith(
        f"# my notes\nTELEGRAM_API_URL={telegram.base_url}\nTIMEZONE=Europe/Paris\n"
    )
    assert stat.S_IMODE(env.stat().st_mode) == 0o600
    assert telegram.token not in term.screen and KEY not in term.screen
    assert telegram.token.split(":")[1] not in term.screen


async def test_a_second_run_changes_one_thing_and_shows_secrets_masked(
    tmp_path: Path, telegram: FakeTelegram, fake_llm: FakeOpenAI, searxng: FakeSearch
) -> None:
    env = tmp_path / ".env"
    before = (
        f"TELEGRAM_API_URL={telegram.base_url}\nTELEGRAM_BOT_TOKEN={telegram.token}\n"
        f"LLM_BASE_URL={fake_llm.base_url}\nLLM_API_KEY={KEY}\nLLM_MODEL=fake-model\n"
        "# friends\nALLOWED_USER_IDS=7,8\n"
    )
    env.write_text(before)
    term = Terminal(tmp_path, "setup")
    await term.expect(r"Telegram bot token  ••••0000")
    await term.expect(r"fake-model at http://127\.0\.0\.1:\d+/v1, key ••••6789")
    await term.expect(r"Owner               7")
    await term.expect(r"Change which \(1-4, Enter: done\) \[done\]: ")
    term.type("4")
    await term.expect(r"Choose 1-3 \[keep\]: ")
    term.type("1")
    await term.expect(r"SearXNG URL \[http://localhost:8888\]: ")
    term.type(searxng.root)
    await term.expect(r"ok: .*results")
    await term.expect(r"Web search          SearXNG http://127")
    await term.expect(r"Change which .*: ")
    term.type("")
    assert await term.ended() == 0
    assert env.read_text() == before + f"SEARXNG_URL={searxng.root}\n"
    assert telegram.token not in term.screen and KEY not in term.screen


async def test_make_runs_it_only_on_a_terminal_when_env_cannot_start_the_bot(
    tmp_path: Path,
) -> None:
    env = tmp_path / ".env"
    env.write_text("LLM_MODEL=x\n")
    piped = subprocess.run(  # noqa: ASYNC221 (a short child, nothing else runs)
        [sys.executable, "-m", "bot.cli", "setup", "--if-needed"], cwd=tmp_path,
        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=WAIT_S,
        env={**os.environ, "PYTHONPATH": str(ROOT), "SIDEKICK_HOME": str(tmp_path)},
    )  # fmt: skip
    assert piped.returncode == 0 and piped.stdout == "" and env.read_text() == "LLM_MODEL=x\n"
    term = Terminal(tmp_path, "setup", "--if-needed")
    await term.expect(r"cannot start the bot yet")
    await term.expect(r"Bot token: ")
    assert await term.interrupt() == 130
    assert env.read_text() == "LLM_MODEL=x\n"


async def test_picking_another_model_keeps_the_others_llm_model_lists(
    tmp_path: Path, telegram: FakeTelegram, fake_llm: FakeOpenAI
) -> None:
    """LLM_MODEL may name the models /model offers after the default: the model picked
    becomes the default and the others stay."""
    fake_llm.models = ["big-model", "fake-model", "small-model"]
    env = tmp_path / ".env"
    env.write_text(
        f"TELEGRAM_API_URL={telegram.base_url}\nTELEGRAM_BOT_TOKEN={telegram.token}\n"
        f"LLM_BASE_URL={fake_llm.base_url}\nLLM_API_KEY={KEY}\n"
        "LLM_MODEL=fake-model, big-model, small-model\nALLOWED_USER_IDS=7\n"
    )
    term = Terminal(tmp_path, "setup")
    await term.expect(r"fake-model, big-model, small-model at http://127\.0\.0\.1:\d+/v1")
    await term.expect(r"Change which \(1-4, Enter: done\) \[done\]: ")
    term.type("2")
    await term.expect(r"Choose 1-5 \[keep\]: ")
    term.type("")
    await term.expect(r"API key \[••••6789, Enter keeps\]: ")
    term.type("")
    await term.expect(r"Model \(number or name\) \[fake-model\]: ")
    term.type("big-model")
    await term.expect(r"ok: big-model")
    await term.expect(r"Change which .*: ")
    term.type("")
    assert await term.ended() == 0
    assert read_env(env)["LLM_MODEL"] == "big-model, fake-model, small-model"


async def test_a_setup_stopped_after_the_token_runs_again_at_the_next_start(
    tmp_path: Path, telegram: FakeTelegram
) -> None:
    """What `make run` does on a first start: .env from the example (which names a model at
    OpenAI and no key), then `setup --if-needed`. Stopped after the token, the settings
    cannot start the bot, so the next start asks again instead of running keyless."""
    env = tmp_path / ".env"
    env.write_text((ROOT / ".env.example").read_text() + f"TELEGRAM_API_URL={telegram.base_url}\n")
    term = Terminal(tmp_path, "setup", "--if-needed")
    await term.expect(r"Bot token: ")
    term.type(telegram.token)
    await term.expect(r"ok: this is your bot")
    await term.expect(r"Choose 1-5 \[keep\]: ")
    code = await term.interrupt()
    assert code == 130, term.screen[-2000:]
    assert read_env(env)["TELEGRAM_BOT_TOKEN"] == telegram.token

    again = Terminal(tmp_path, "setup", "--if-needed")
    await again.expect(r"cannot start the bot yet")
    await again.expect(r"Bot token \[••••0000, Enter keeps\]: ")
    assert await again.interrupt() == 130


async def test_an_unreachable_endpoint_asks_for_the_url_again(
    tmp_path: Path, telegram: FakeTelegram, fake_llm: FakeOpenAI
) -> None:
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    nowhere = f"http://127.0.0.1:{closed.getsockname()[1]}/v1"
    closed.close()  # nothing listens there now
    env = tmp_path / ".env"
    env.write_text(
        f"TELEGRAM_API_URL={telegram.base_url}\nTELEGRAM_BOT_TOKEN={telegram.token}\n"
        f"LLM_BASE_URL={fake_llm.base_url}\nLLM_MODEL=fake-model\nALLOWED_USER_IDS=7\n"
    )
    term = Terminal(tmp_path, "setup")
    await term.expect(r"Change which \(1-4, Enter: done\) \[done\]: ")
    term.type("2")
    await term.expect(r"Choose 1-5 \[keep\]: ")
    term.type("5")
    await term.expect(r"Endpoint URL \(ending in /v1\) .*: ")
    term.type(nowhere)  # a typo in the port
    await term.expect(r"API key: ")
    term.type("")
    await term.expect(r"not ok: cannot connect")
    await term.expect(r"Keep these anyway\? \[y/N\]: ")
    term.type("n")
    await term.expect(r"Choose 1-5 \[5\]: ")  # the endpoint again, not the key
    term.type("")
    await term.expect(re.escape(f"Endpoint URL (ending in /v1) [{nowhere}]: "))
    term.type(fake_llm.base_url)
    await term.expect(r"API key: ")
    term.type("")
    await term.expect(r"ok: 1 models")
    await term.expect(r"Model \(number or name\) \[fake-model\]: ")
    term.type("")
    await term.expect(r"Change which .*: ")
    term.type("")
    assert await term.ended() == 0
    assert read_env(env)["LLM_BASE_URL"] == fake_llm.base_url


async def test_search_that_does_not_answer_can_be_changed_or_turned_off(
    tmp_path: Path, telegram: FakeTelegram, fake_llm: FakeOpenAI
) -> None:
    env = tmp_path / ".env"
    before = (
        f"TELEGRAM_API_URL={telegram.base_url}\nTELEGRAM_BOT_TOKEN={telegram.token}\n"
        f"LLM_BASE_URL={fake_llm.base_url}\nLLM_MODEL=fake-model\nALLOWED_USER_IDS=7\n"
    )
    env.write_text(before)
    term = Terminal(tmp_path, "setup")
    await term.expect(r"Change which \(1-4, Enter: done\) \[done\]: ")
    term.type("4")
    await term.expect(r"Choose 1-3 \[keep\]: ")
    term.type("1")
    await term.expect(r"SearXNG URL \[http://localhost:8888\]: ")
    term.type("http://127.0.0.1:9")
    await term.expect(r"not ok: cannot reach SearXNG")
    await term.expect(r"Keep it anyway\? \[y/N\]: ")
    term.type("n")
    await term.expect(r"Choose 1-3 \[1\]: ")
    term.type("3")
    await term.expect(r"Web search          off")
    await term.expect(r"Change which .*: ")
    term.type("")
    assert await term.ended() == 0
    assert "SEARXNG_URL" not in read_env(env)


async def test_a_mistyped_model_does_not_stay_behind_as_a_second_model(
    tmp_path: Path, telegram: FakeTelegram, fake_llm: FakeOpenAI
) -> None:
    """A name kept by mistake ("Keep it anyway?") is replaced by the right one, not kept as a
    second model for /model to offer: only what the endpoint offers stays."""
    fake_llm.models = ["big-model", "fake-model"]
    env = tmp_path / ".env"
    env.write_text(
        f"TELEGRAM_API_URL={telegram.base_url}\nTELEGRAM_BOT_TOKEN={telegram.token}\n"
        f"LLM_BASE_URL={fake_llm.base_url}\nLLM_API_KEY={KEY}\n"
        "LLM_MODEL=fake-modle, big-model\nALLOWED_USER_IDS=7\n"
    )
    term = Terminal(tmp_path, "setup")
    await term.expect(r"Change which \(1-4, Enter: done\) \[done\]: ")
    term.type("2")
    await term.expect(r"Choose 1-5 \[keep\]: ")
    term.type("")
    await term.expect(r"API key \[••••6789, Enter keeps\]: ")
    term.type("")
    await term.expect(r"Model \(number or name\) \[big-model\]: ")
    term.type("fake-model")
    await term.expect(r"ok: fake-model")
    await term.expect(r"Change which .*: ")
    term.type("")
    assert await term.ended() == 0
    assert read_env(env)["LLM_MODEL"] == "fake-model, big-model"
