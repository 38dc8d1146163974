"""`sidekick chat` as a person would use it: a real subprocess, typed lines, the fake model."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from asyncio.subprocess import Process
from pathlib import Path

import pytest

from bot.agent.prompt import without_context
from tests.child import interruptible
from tests.fakes.openai_server import FakeOpenAI, Text

pytestmark = pytest.mark.db  # every test here opens its own database


def chat_env(tmp_path: Path, fake_llm: FakeOpenAI, **extra: str) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "DATA_DIR": str(tmp_path / "data"),
        "LLM_BASE_URL": fake_llm.base_url,
        "LLM_API_KEY": "sk-terminal-secret",
        "LLM_MODEL": "fake-model",
        **{k: v for k, v in os.environ.items() if k == "DATABASE_URL"},  # make test-pg
        **extra,
    }


async def start_chat(tmp_path: Path, env: dict[str, str], *args: str, prelude: str = "") -> Process:
    """`sidekick chat` in a child process; `prelude` (Python) runs first in it, e.g. to set
    a module constant that is no setting (a shorter timeout)."""
    pipe = asyncio.subprocess.PIPE
    main = f"{prelude}\nfrom bot.cli import main\nraise SystemExit(main(['chat', *{args!r}]))"
    return await asyncio.create_subprocess_exec(
        sys.executable, "-c", main,
        cwd=tmp_path, env=env, stdin=pipe, stdout=pipe, stderr=pipe, preexec_fn=interruptible,
    )  # fmt: skip


async def run_chat(
    tmp_path: Path, fake_llm: FakeOpenAI, stdin: str, *args: str, prelude: str = "", **extra: str
) -> tuple[int, str, str]:
    env = chat_env(tmp_path, fake_llm, **extra)
    proc = await start_chat(tmp_path, env, *args, prelude=prelude)
    out, err = await asyncio.wait_for(proc.communicate(stdin.encode()), 120)
    return proc.returncode or 0, out.decode(), err.decode()


async def test_terminal_chat_round_trip_and_new_session(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    fake_llm.add(Text("Hi from the model"))
    code, out, err = await run_chat(tmp_path, fake_llm, "hello\n/new Trip planning\nsecond\n")
    assert code == 0, err
    assert (
        "Hi from the model" in out
        and "Started a new session: Trip planning." in out
        and "echo: second" in out
    )
    # The new session starts with an empty history: only the new message was sent. (The old
    # session's summary is written in the background: its call may come before or after.)
    [asked] = [
        r["messages"]
        for r in fake_llm.requests
        if without_context(r["messages"][-1]["content"]).endswith("second")
    ]
    assert [without_context(m["content"]) for m in asked[1:]] == ["second"]
    assert "sk-terminal-secret" not in out + err


async def test_terminal_chat_survives_provider_outage(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    from tests.fakes.openai_server import Error

    fake_llm.add(Error(503), Error(503), Text("back again"))
    code, out, err = await run_chat(
        tmp_path, fake_llm, "one\ntwo\n", prelude="import bot.llm.client as c; c.MAX_RETRIES = 1"
    )
    assert code == 0, err
    assert "not answering (HTTP 503)" in out and "back again" in out
    assert "Traceback" not in out


async def test_terminal_commands_are_answered_locally(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    stdin = "/help\n/tools\n/memory\n/sessions\n/timezone\n/frobnicate the thing\n"
    code, out, err = await run_chat(tmp_path, fake_llm, stdin)
    assert code == 0, err
    assert "/memory [layer | search <text> | forget <id>] — what I remember about you" in out
    assert "memory" in out and "No long memories." in out  # /tools, /memory
    assert "Your recent sessions" in out or "No sessions yet" in out
    assert "Your time zone: UTC" in out
    # Only the unknown command reached the model; the known ones never did.
    sent = [
        without_context(m["content"])
        for r in fake_llm.requests
        for m in r["messages"]
        if m["role"] == "user"
    ]
    assert sent == ["/frobnicate the thing"]
    # The prompt is on stdout; log lines (Alembic, code tool) went to DATA_DIR/chat.log.
    assert out.count("you> ") == 7
    assert err == ""
    assert "alembic" not in out.lower() and "INFO" not in out
    assert "code tool" in (tmp_path / "data" / "chat.log").read_text()


async def test_chat_as_a_telegram_user_shares_their_history(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    code, out, err = await run_chat(tmp_path, fake_llm, "one as 4242\n", "--as", "4242")
    assert code == 0, err
    assert "as Telegram user 4242" in out
    code, _, err = await run_chat(tmp_path, fake_llm, "two as 4242\n", "--as", "4242")
    assert code == 0, err
    linked = [
        without_context(m["content"])
        for m in fake_llm.requests[-1]["messages"]
        if m["role"] == "user"
    ]
    assert linked == ["one as 4242", "two as 4242"]
    code, _, err = await run_chat(tmp_path, fake_llm, "the local user\n")
    assert code == 0, err
    local = [
        without_context(m["content"])
        for m in fake_llm.requests[-1]["messages"]
        if m["role"] == "user"
    ]
    assert local == ["the local user"]


async def test_ctrl_c_at_the_prompt_leaves_at_once(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    proc = await start_chat(tmp_path, chat_env(tmp_path, fake_llm))
    assert proc.stdout is not None
    try:
        await asyncio.wait_for(proc.stdout.readuntil(b"you> "), 120)  # waiting for a line
        proc.send_signal(signal.SIGINT)
        # stdin stays open: the read never returns, yet the process must end by itself.
        _, err = await asyncio.wait_for(proc.communicate(), 30)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 130, err
    assert b"Traceback" not in err


async def test_mcp_servers_stderr_goes_to_a_file_not_the_chat(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    from tests.tools_helpers import FAKE_SERVER, write_mcp_config

    code = (
        "import runpy, sys\n"
        "print('chatter from the server', file=sys.stderr, flush=True)\n"
        f"sys.argv = [{str(FAKE_SERVER)!r}]\n"
        f"runpy.run_path({str(FAKE_SERVER)!r}, run_name='__main__')\n"
    )
    cfg = write_mcp_config(tmp_path, noisy={"command": sys.executable, "args": ["-c", code]})
    status, out, err = await run_chat(tmp_path, fake_llm, "/tools\n", MCP_CONFIG=str(cfg))
    assert status == 0, err
    assert "chatter from the server" not in out + err
    assert "chatter from the server" in (tmp_path / "data" / "mcp.log").read_text()


async def test_the_terminal_shows_it_is_thinking_until_the_first_text(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    """On a terminal (a pty here), "thinking…" stands between Enter and the first token, the
    tool being run while it runs, and both are erased when the answer's text starts."""
    import pty

    from tests.fakes.openai_server import Calls

    fake_llm.add(
        Calls([("schedule", {"action": "list"})]),
        Text("Nothing is scheduled.", delay=0.05),
    )
    master, slave = pty.openpty()
    pipe = asyncio.subprocess.PIPE
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot.cli", "chat",
        cwd=tmp_path, env=chat_env(tmp_path, fake_llm), stdin=pipe, stdout=slave, stderr=pipe,
    )  # fmt: skip
    os.close(slave)
    assert proc.stdin is not None
    proc.stdin.write(b"what is planned?\n")
    proc.stdin.close()
    await asyncio.wait_for(proc.wait(), 120)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the pty is closed once the child is gone and it is drained
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    out = b"".join(chunks).decode()
    assert proc.returncode == 0
    thinking = out.index("thinking…")
    running = out.index("running schedule, then thinking…")
    answer = out.index("Nothing is scheduled.")
    assert thinking < running < answer
    assert out[:answer].endswith("\r\x1b[K")  # erased right before the text


async def test_bidi_controls_from_the_model_are_shown_escaped(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    """The terminal renders for the person as Telegram does (bot/shown.py): U+202E in an
    answer or a model's name (/usage) is printed as \\u202e, never reorders the line."""
    fake_llm.add(Text("open invoice\u202egpj.exe"))
    here = {k: v for k, v in os.environ.items() if k == "PYTHONPATH"}  # a worktree's code
    code, out, err = await run_chat(
        tmp_path, fake_llm, "hello\n/usage\n", LLM_MODEL="fake\u202eledom", **here
    )
    assert code == 0, err
    assert "open invoice\\u202egpj.exe" in out and "fake\\u202eledom" in out
    assert "\u202e" not in out
