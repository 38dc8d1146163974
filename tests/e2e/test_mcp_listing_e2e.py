"""An MCP server's tool list as requests meet it: the manager's listing is rewritten when a
health probe finds the list changed, and the next request finds the new tool."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from tests.e2e.conftest import OWNER, TG
from tests.fakes.openai_server import Calls, Text
from tests.tools_helpers import tool_results, write_mcp_config
from tools.mcp import config as mcp_config

LEARNED = "fake__glimmer"


async def explain_learned(tg: TG) -> str:
    """One request whose model explains the learned tool; the result it got."""
    tg.llm.add(Calls([("tool_explain", {"name": LEARNED})]), Text("looked"))
    start = len(tg.llm.requests)
    await tg.send(OWNER, "is there a glimmer tool")
    assert (await tg.reply(OWNER)).text == "looked"
    return tool_results(tg.llm.requests[start + 1])[-1]


async def test_a_servers_new_tool_reaches_the_next_request(
    make_tg: Callable[..., Awaitable[TG]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mcp_config, "HEALTH_INTERVAL_S", 0.2)  # the probe that re-lists
    tg = await make_tg(mcp_config=write_mcp_config(tmp_path, extras=True), approvals="off")
    assert f"no tool named {LEARNED!r}" in await explain_learned(tg)

    tg.llm.add(
        Calls([("tool_explain", {"name": "fake__learn"})]),
        Calls([("fake__learn", {"query": "glimmer"})]),
        Text("learned"),
    )
    await tg.send(OWNER, "learn glimmer")
    assert (await tg.reply(OWNER)).text == "learned"
    # The server offers it from its next listing on; /tools counts the server's tools.
    for _ in range(600):
        await tg.send(OWNER, "/tools")
        if "fake: up, 68 tools" in (await tg.reply(OWNER)).text:
            break
        await asyncio.sleep(0.1)
    else:
        pytest.fail("the server's new tool was never listed")

    assert "learned at run time: glimmer" in await explain_learned(tg)
    tg.llm.add(Calls([("tool_explain", {"name": LEARNED})]), Calls([(LEARNED, {})]), Text("ok"))
    start = len(tg.llm.requests)
    await tg.send(OWNER, "use glimmer")
    assert (await tg.reply(OWNER)).text == "ok"
    assert "glimmer ok" in tool_results(tg.llm.requests[start + 2])[-1]
