"""Tool discovery end to end: a 60-tool stdio MCP server behind a 3800-token budget."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from bot.agent.runner import Incoming
from bot.app import App
from db.models import ToolUsage
from tests.fakes.mcp_catalog import TOOLS
from tests.fakes.openai_server import Calls, FakeOpenAI, Text, Turn
from tests.tools_helpers import build_tools_app, tool_names, tool_results, write_mcp_config
from tools.discovery.tokens import count_payload

CORE = {"memory", "search", "code"}


@pytest.fixture
async def mcp_app(tmp_path: Path, fake_llm: FakeOpenAI) -> AsyncIterator[App]:
    app = await build_tools_app(
        tmp_path, fake_llm, mcp_config=write_mcp_config(tmp_path), agent_max_turns=400
    )
    yield app
    await app.close()


async def test_every_tool_reachable_within_budget(mcp_app: App, fake_llm: FakeOpenAI) -> None:
    """search → explain → call for each of the 60, driven by what tool_search answers."""
    todo = list(TOOLS)
    state: dict[str, Any] = {"step": "search", "misses": [], "done": []}

    def respond(body: dict[str, Any]) -> Turn:
        last = body["messages"][-1]
        result = last["content"] if last["role"] == "tool" else ""
        step = state["step"]
        if step == "call":
            state["done"].append(result)
            todo.pop(0)
            step = "search"
        if step == "search":
            if not todo:
                return Text("all done")
            state["step"] = "explain"
            return Calls([("tool_search", {"query": todo[0][1], "limit": 5})])
        want = f"fake__{todo[0][0]}"
        if step == "explain":
            found = [t["name"] for t in json.loads(result)["tools"]]
            if want not in found:
                state["misses"].append(want)
            state["step"] = "call"
            return Calls([("tool_explain", {"name": want})])
        raise AssertionError(step)

    def respond_call(body: dict[str, Any]) -> Turn:
        # After tool_explain answered, call the tool it loaded.
        last = body["messages"][-1]
        if state["step"] == "call" and last["role"] == "tool" and '"note"' in last["content"]:
            name = json.loads(last["content"])["name"]
            assert name in tool_names(body), "an explained tool joins the next call's tools"
            state["step"] = "called"
            return Calls([(name, {"query": "Paris"})])
        if state["step"] == "called":
            state["step"] = "call"
        return respond(body)

    fake_llm.responder = respond_call
    reply = await mcp_app.agent.handle(Incoming("use every tool once", telegram_user_id=5))
    assert reply.text == "all done"
    assert state["misses"] == []
    assert len(state["done"]) == 60
    for (name, _), result in zip(TOOLS, state["done"], strict=True):
        assert result.startswith(f"{name} ok"), result
    budget = mcp_app.settings.tool_token_budget
    payloads = [count_payload(b["tools"]) for b in fake_llm.requests]
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
        assert "tool_search" not in names
    finally:
        await app.close()


async def test_tiny_budget_still_keeps_core_and_discovery(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    app = await build_tools_app(tmp_path, fake_llm, tool_token_budget=200)
    try:
        fake_llm.add(Calls([("tool_search", {"query": "read a web page"})]), Text("ok"))
        await app.agent.handle(Incoming("read https://example.org", telegram_user_id=1))
        names = tool_names(fake_llm.requests[0])
        assert CORE <= set(names) and "web_fetch" not in names and "tool_search" in names
        hits = json.loads(tool_results(fake_llm.requests[1])[0])["tools"]
        assert hits[0]["name"] == "web_fetch"
    finally:
        await app.close()
