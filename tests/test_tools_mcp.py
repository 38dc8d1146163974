"""MCP servers that crash, stall, send garbage or fail; config errors; env isolation."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.agent.runner import Incoming
from bot.app import App
from bot.errors import ConfigError
from bot.ops.doctor import all_checks
from tests.fakes.openai_server import Calls, FakeOpenAI, Text
from tests.tools_helpers import FAKE_SERVER, build_tools_app, tool_results, write_mcp_config
from tools.base import ToolError
from tools.effects import OUTSIDE_MARK
from tools.mcp import manager as mcp_module
from tools.mcp.config import HttpServer, StdioServer, load_config, parse_config
from tools.mcp.convert import render_result
from tools.mcp.manager import McpManager

DOCTOR = ("check_discovery", "check_mcp")  # the tool budget's row; one row per server


@pytest.fixture
async def extras_app(
    tmp_path: Path, fake_llm: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[App]:
    monkeypatch.setenv("SIDEKICK_TEST_SECRET", "hunter2")  # must not reach the server
    monkeypatch.setattr(mcp_module, "CALL_TIMEOUT_S", 5.0)
    cfg = write_mcp_config(tmp_path, extras=True)
    app = await build_tools_app(tmp_path, fake_llm, mcp_config=cfg)
    yield app
    await app.close()


async def run_calls(app: App, fake_llm: FakeOpenAI, *names: str) -> list[str]:
    """One request that explains and calls each tool in turn; returns the call results."""
    for name in names:
        fake_llm.add(Calls([("tool_explain", {"name": name})]), Calls([(name, {})]))
    fake_llm.add(Text("done"))
    start = len(fake_llm.requests)
    reply = await app.agent.handle(Incoming("test the server", telegram_user_id=3))
    assert reply.text == "done"
    bodies = fake_llm.requests[start:]
    return [answer_of(tool_results(bodies[2 * i + 2])[-1]) for i in range(len(names))]


def answer_of(result: str) -> str:
    """The server's answer: a result that is one comes marked as outside content."""
    note, sep, rest = result.partition("\n")
    if note.startswith(OUTSIDE_MARK):
        assert "the MCP tool " in note and sep
        return rest
    return result


@pytest.mark.db
async def test_misbehaving_server(extras_app: App, fake_llm: FakeOpenAI) -> None:
    """One server process through a crash, a stall, junk output and a failing tool: each
    is an error result for that call only, and the next call works. (One app for all:
    each server start costs a second.)"""
    # Crash: the call fails, the server restarts, the next call waits for it.
    crashed, _ = await run_calls(extras_app, fake_llm, "fake__crash", "fake__weather_current")
    assert "stopped answering" in crashed and "restarted" in crashed
    (after,) = await run_calls(extras_app, fake_llm, "fake__weather_current")
    assert after.startswith("weather_current ok")
    manager = extras_app.registry.mcp
    assert manager is not None and manager.servers[0].starts >= 2
    # Slow: the per-call timeout answers, the server stays usable.
    slow, fine = await run_calls(extras_app, fake_llm, "fake__slow", "fake__weather_current")
    assert "did not answer within 5 s" in slow
    assert fine.startswith("weather_current ok")
    # Garbage on stdout: skipped when an answer follows, a timeout when none does.
    garbage, junk, failed = await run_calls(
        extras_app, fake_llm, "fake__garbage", "fake__garbage_only", "fake__fail"
    )
    assert garbage == "garbage sent"
    assert junk.startswith("Error:") and "did not answer" in junk
    assert failed.startswith("Error:") and "fail" in failed
    (after,) = await run_calls(extras_app, fake_llm, "fake__todo_list")
    assert after.startswith("todo_list ok")
    # The process environment: PATH, never the bot's secrets.
    assert os.environ["SIDEKICK_TEST_SECRET"] == "hunter2"
    (keys,) = await run_calls(extras_app, fake_llm, "fake__env_keys")
    names = set(keys.split())
    assert "PATH" in names
    assert "SIDEKICK_TEST_SECRET" not in names and not any("KEY" in n for n in names)


@pytest.mark.db
async def test_broken_server_does_not_stop_the_bot(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    missing = {"command": str(tmp_path / "no-such-binary"), "args": []}
    quits = {"command": sys.executable, "args": ["-c", "print('hello')"]}
    cfg = write_mcp_config(tmp_path, missing=missing, quits=quits)
    app = await build_tools_app(tmp_path, fake_llm, mcp_config=cfg)
    try:
        manager = app.registry.mcp
        assert manager is not None
        status = {s.name: s for s in manager.status()}
        assert status["fake"].up and status["fake"].tools == 60
        assert not status["missing"].up and status["missing"].error
        assert not status["quits"].up
        ours = [c for c in all_checks(app.features) if c.__name__ in DOCTOR]
        assert len(ours) == len(DOCTOR)
        checks = {c.name: c for check in ours for c in await check(app)}
        assert checks["tools"].ok and "3 core + 62 extension tools" in checks["tools"].detail
        assert checks["MCP fake"].ok and checks["MCP fake"].detail == "up, 60 tools"
        assert not checks["MCP missing"].ok and "MCP_CONFIG" in checks["MCP missing"].fix
        fake_llm.add(Text("still here"))
        assert (await app.agent.handle(Incoming("hi", telegram_user_id=1))).text == "still here"
    finally:
        await app.close()


def test_config_parsing_and_errors(tmp_path: Path) -> None:
    parsed = parse_config(
        {
            "mcpServers": {
                "files": {"command": "npx", "args": ["-y", "x"], "env": {"ROOT": "/tmp"}},
                "remote": {"url": "https://mcp.example.org/mcp", "headers": {"X-Key": "k"}},
                "off": {"command": "x", "disabled": True},
            }
        }
    )
    assert parsed == [
        StdioServer("files", "npx", ["-y", "x"], {"ROOT": "/tmp"}),
        HttpServer("remote", "https://mcp.example.org/mcp", {"X-Key": "k"}),
    ]
    # A server shown anywhere (a log line, an error) shows no key it carries.
    keyed = parse_config(
        {
            "mcpServers": {
                "files": {"command": "npx", "env": {"API_KEY": "sk-env-secret"}},
                "remote": {"url": "https://mcp.example.org/m", "headers": {"X-Key": "hdr-secret"}},
            }
        }
    )
    assert all("secret" not in repr(server) for server in keyed), keyed
    bad = [
        ({}, "mcpServers"),
        ({"mcpServers": {"a__b": {"command": "x"}}}, "single '_'"),
        ({"mcpServers": {"a": {"args": []}}}, "command or url"),
        ({"mcpServers": {"a": {"url": "ftp://x"}}}, "http"),
        ({"mcpServers": {"a": {"command": "x", "args": "y"}}}, "args"),
        ({"mcpServers": {"a": {"command": "x", "env": {"A": [1]}}}}, "env"),
    ]
    for data, words in bad:
        with pytest.raises(ConfigError, match=words):
            parse_config(data)
    path = tmp_path / "m.json"
    path.write_text("{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_config(path)
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "absent.json")
    path.write_text(json.dumps({"mcpServers": {"s": {"command": str(FAKE_SERVER)}}}))
    assert load_config(path)[0].name == "s"


async def test_health_pings_keep_a_live_server_and_restart_a_dead_one() -> None:
    cfg = StdioServer("fake", sys.executable, [str(FAKE_SERVER), "--extras"])
    manager = McpManager([cfg], call_timeout=15, health_interval=0.05)
    await manager.start()
    try:
        server = manager.servers[0]
        await asyncio.sleep(0.5)  # several health probes of a live server
        assert server.up and server.starts == 1
        with pytest.raises(ToolError, match="stopped answering"):
            await server.call("crash", {})
        result = await server.call("todo_list", {})  # waits for the restart
        assert render_result(result).startswith("todo_list ok") and server.starts == 2
    finally:
        await manager.stop()
    assert not manager.servers[0].up


@pytest.mark.db
async def test_streamable_http_server(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(FAKE_SERVER),
        "--http",
        str(port),
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        for _ in range(1200):  # until it listens (a minute at most: imports are slow under load)
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.close()
                break
            except OSError:
                await asyncio.sleep(0.05)
        url = f"http://127.0.0.1:{port}/mcp"
        cfg = tmp_path / "http.json"
        cfg.write_text(json.dumps({"mcpServers": {"web": {"url": url, "headers": {"X-A": "1"}}}}))
        app = await build_tools_app(tmp_path, fake_llm, mcp_config=cfg)
        try:
            (result,) = await run_calls(app, fake_llm, "web__stocks_quote")
            assert result.startswith("stocks_quote ok")
        finally:
            await app.close()
    finally:
        proc.terminate()
        await proc.wait()


def children(command_part: str) -> list[int]:
    """Our child processes whose command line holds `command_part` (Linux /proc)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
        except (OSError, IndexError, ValueError):
            continue
        if ppid == os.getpid() and command_part in cmdline:
            out.append(int(entry.name))
    return out


async def test_a_dead_server_is_down_at_once_and_its_restart_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cfg = StdioServer("fake", sys.executable, [str(FAKE_SERVER), "--extras"])
    manager = McpManager([cfg], call_timeout=15)  # health probe only every 30 s
    await manager.start()
    try:
        server = manager.servers[0]
        assert server.up
        (pid,) = children(str(FAKE_SERVER))
        os.kill(pid, signal.SIGKILL)
        async with asyncio.timeout(20):  # less than the health interval
            while server.up:  # noqa: ASYNC110 (no event marks "down"; polling is the check)
                await asyncio.sleep(0.02)
        async with asyncio.timeout(20):
            await server.ready.wait()
        assert server.starts == 2
    finally:
        await manager.stop()
    text = caplog.text
    assert "MCP server fake stopped" in text and "MCP server fake is up again" in text


async def test_junk_on_stdout_is_logged_once_per_connection(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Like a server that prints a banner to stdout before speaking MCP (the SDK's own server
    # side diverts stdout, so the junk is printed before it starts).
    code = (
        "import runpy, sys\n"
        "for i in range(5): print('banner line', i, flush=True)\n"
        f"sys.argv = [{str(FAKE_SERVER)!r}]\n"
        f"runpy.run_path({str(FAKE_SERVER)!r}, run_name='__main__')\n"
    )
    cfg = StdioServer("chatty", sys.executable, ["-c", code])
    manager = McpManager([cfg], call_timeout=15)
    await manager.start()
    try:
        server = manager.servers[0]
        assert server.up
        assert render_result(await server.call("todo_list", {})).startswith("todo_list ok")
    finally:
        await manager.stop()
    junk = [r for r in caplog.records if "not MCP on its stdout" in r.getMessage()]
    assert len(junk) == 1 and "banner line 0" in junk[0].getMessage()
    assert not [r for r in caplog.records if r.exc_info or r.exc_text]  # no tracebacks


async def test_errors_name_the_cause_not_the_task_group() -> None:
    cfg = StdioServer("ghost", "/nonexistent/mcp-server", [])
    manager = McpManager([cfg], call_timeout=5, start_wait=5)
    await manager.start()
    try:
        (status,) = manager.status()
        assert not status.up and status.error is not None
        assert "TaskGroup" not in status.error and "ExceptionGroup" not in status.error
        assert "FileNotFoundError" in status.error or "No such file" in status.error
    finally:
        await manager.stop()
