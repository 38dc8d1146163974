"""Tool discovery end to end: a 60-tool stdio MCP server behind a 3800-token budget."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from bot.agent import runner
from bot.agent.runner import Incoming
from bot.app import App
from tests.fakes.mcp_catalog import TOOLS
from tests.fakes.openai_server import Calls, FakeOpenAI, Text, Turn
from tests.tools_helpers import build_tools_app, tool_names, tool_results, write_mcp_config
from tools import registry as discovery
from tools.discovery.models import ToolUsage
from tools.effects import OUTSIDE_MARK
from tools.tokens import count_payload

pytestmark = pytest.mark.db  # every test here opens its own database

CORE = {"memory", "code", "schedule"}  # search has no backend here: not offered


@pytest.fixture
async def mcp_app(
    tmp_path: Path, fake_llm: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[App]:
    monkeypatch.setattr(runner, "MAX_TOOL_CALLS", 400)
    app = await build_tools_app(tmp_path, fake_llm, mcp_config=write_mcp_config(tmp_path))
    yield app
    await app.close()


async def test_every_tool_reachable_within_budget(mcp_app: App, fake_llm: FakeOpenAI) -> None:
    """search → explain → call for each of the 60, driven by what tool_search answers.

    Ten needs per message, each step as parallel calls in one model turn (a long
    conversation makes the OpenAI SDK's request encoding slow; the path is the same)."""
    chunk: list[tuple[str, str]] = []
    state: dict[str, Any] = {"step": "search", "misses": [], "done": []}

    def respond(body: dict[str, Any]) -> Turn:
        if not body.get("tools"):  # the long session's history is being compressed
            return Text("The user had tools found, explained and called.")
        wanted = [f"fake__{name}" for name, _ in chunk]
        results = tool_results(body)[-len(chunk) :]
        step = state["step"]
        if step == "search":
            state["step"] = "explain"
            return Calls([("tool_search", {"query": desc, "limit": 5}) for _, desc in chunk])
        if step == "explain":
            for want, result in zip(wanted, results, strict=True):
                if want not in [t["name"] for t in json.loads(result)["tools"]]:
                    state["misses"].append(want)
            state["step"] = "call"
            return Calls([("tool_explain", {"name": want}) for want in wanted])
        if step == "call":
            missing = set(wanted) - set(tool_names(body))
            assert not missing, "explained tools join the next call's tools"
            state["step"] = "done"
            return Calls([(want, {"query": "Paris"}) for want in wanted])
        state["done"].extend(results)
        state["step"] = "search"
        return Text("all done")

    fake_llm.responder = respond
    for start in range(0, 60, 10):
        chunk[:] = TOOLS[start : start + 10]
        reply = await mcp_app.agent.handle(Incoming("use these tools", telegram_user_id=5))
        assert reply.text == "all done"
    assert state["misses"] == []
    assert len(state["done"]) == 60
    for (name, _), result in zip(TOOLS, state["done"], strict=True):
        marker, said = result.split("\n", 1)  # MCP results are marked as outside content
        assert marker.startswith(OUTSIDE_MARK) and said.startswith(f"{name} ok"), result
    budget = discovery.TOOL_TOKEN_BUDGET
    payloads = [count_payload(b["tools"]) for b in fake_llm.requests if b.get("tools")]
    assert max(payloads) <= budget
    first = tool_names(fake_llm.requests[0])
    assert CORE <= set(first) and {"tool_search", "tool_explain"} <= set(first)
    assert not any(n.startswith("fake__") for n in first)


async def test_hidden_and_unknown_tools_point_to_discovery(
    mcp_app: App, fake_llm: FakeOpenAI
) -> None:
    fake_llm.add(
        Calls([("fake__weather_current", {"query": "Oslo"}), ("no_such_tool", {})]),
        Calls([("tool_explain", {"name": "fake__weather_currnt"})]),
        Text("ok"),
    )
    await mcp_app.agent.handle(Incoming("weather?", telegram_user_id=5))
    hidden, unknown = tool_results(fake_llm.requests[1])
    assert "not loaded" in hidden and "tool_explain" in hidden
    assert "unknown tool 'no_such_tool'" in unknown and "tool_search" in unknown
    bad_explain = tool_results(fake_llm.requests[2])[-1]
    assert "no tool named" in bad_explain and "fake__weather_current" in bad_explain


async def test_usage_is_learned_and_loaded_directly(mcp_app: App, fake_llm: FakeOpenAI) -> None:
    name = "fake__currency_convert"
    for _ in range(2):
        fake_llm.add(
            Calls([("tool_explain", {"name": name})]),
            Calls([(name, {"query": "100 EUR", "target": "USD"})]),
            Text("done"),
        )
        await mcp_app.agent.handle(Incoming("100 euros in dollars", telegram_user_id=8))
    # tool_explain hands over the MCP tool's own input schema.
    explained = json.loads(fake_llm.requests[1]["messages"][-1]["content"])
    assert {"query", "target"} <= set(explained["parameters"]["properties"])
    async with mcp_app.session_factory() as s:
        rows = list((await s.execute(select(ToolUsage))).scalars())
    assert [(r.tool, r.request_text) for r in rows] == [(name, "100 euros in dollars")] * 2
    # A failed call teaches nothing.
    fake_llm.add(Calls([("tool_explain", {"name": "fake__sms_send"})]), Text("x"))
    fake_llm.add(Text("plain answer"))
    await mcp_app.agent.handle(Incoming("hello", telegram_user_id=8))
    await mcp_app.agent.handle(Incoming("again", telegram_user_id=8))
    later = tool_names(fake_llm.requests[-1])
    assert name in later and "fake__sms_send" not in later  # explained, never called
    assert name not in tool_names(fake_llm.requests[0])  # before it was learned
    # Another user has not used it: not loaded for them.
    fake_llm.add(Text("hi"))
    await mcp_app.agent.handle(Incoming("hi", telegram_user_id=9))
    assert name not in tool_names(fake_llm.requests[-1])


async def test_small_catalog_is_shown_whole(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    app = await build_tools_app(tmp_path, fake_llm)
    try:
        await app.agent.handle(Incoming("hi", telegram_user_id=1))
        names = tool_names(fake_llm.requests[0])
        assert "web_fetch" in names and CORE <= set(names)
        assert "tool_search" not in names and "search" not in names
    finally:
        await app.close()


async def test_tiny_budget_still_keeps_core_and_discovery(
    tmp_path: Path, fake_llm: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(discovery, "TOOL_TOKEN_BUDGET", 200)
    app = await build_tools_app(tmp_path, fake_llm)
    try:
        fake_llm.add(Calls([("tool_search", {"query": "read a web page"})]), Text("ok"))
        await app.agent.handle(Incoming("read https://example.org", telegram_user_id=1))
        names = tool_names(fake_llm.requests[0])
        assert CORE <= set(names) and "web_fetch" not in names and "tool_search" in names
        hits = json.loads(tool_results(fake_llm.requests[1])[0])["tools"]
        assert hits[0]["name"] == "web_fetch"
    finally:
        await app.close()
