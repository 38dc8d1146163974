"""`sidekick chat` as a person would use it: a real subprocess, typed lines, the fake model."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

from tests.fakes.openai_server import FakeOpenAI, Text


async def run_chat(
    tmp_path: Path, fake_llm: FakeOpenAI, stdin: str, **extra: str
) -> tuple[int, str, str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "DATA_DIR": str(tmp_path / "data"),
        "LLM_BASE_URL": fake_llm.base_url,
        "LLM_API_KEY": "sk-terminal-secret",
        "LLM_MODEL": "fake-model",
        **{k: v for k, v in os.environ.items() if k == "DATABASE_URL"},  # make test-pg
        **extra,
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bot.cli",
        "chat",
        cwd=tmp_path,
        env=env,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(stdin.encode()), 120)
    return proc.returncode or 0, out.decode(), err.decode()


async def test_terminal_chat_round_trip_and_new_session(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    fake_llm.add(Text("Hi from the model"))
    code, out, err = await run_chat(tmp_path, fake_llm, "hello\n/new Trip planning\nsecond\n")
    assert code == 0, err
    assert "Hi from the model" in out and "(new session)" in out and "echo: second" in out
    # The new session starts with an empty history: only the new message was sent.
    last = fake_llm.requests[-1]["messages"]
    assert [m["content"] for m in last[1:]] == ["second"]
    assert "sk-terminal-secret" not in out + err


async def test_terminal_chat_survives_provider_outage(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    from tests.fakes.openai_server import Error

    fake_llm.add(Error(503), Error(503), Text("back again"))
    code, out, err = await run_chat(tmp_path, fake_llm, "one\ntwo\n", LLM_MAX_RETRIES="1")
    assert code == 0, err
    assert "not answering (HTTP 503)" in out and "back again" in out
    assert "Traceback" not in out
