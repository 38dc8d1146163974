"""The agent loop against the scripted model server, with tools that exist only here."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel, Field
from sqlalchemy import select

from bot.agent import runner
from bot.agent.prompt import without_context
from bot.agent.runner import Agent, Incoming
from bot.app import App
from db.models import Message, ToolCallRecord
from tests.fakes.openai_server import Calls, Error, FakeOpenAI, Text
from tools.base import Tool, ToolCall, ToolError
from tools.registry import Registry


class AddParams(BaseModel):
    a: int
    b: int = Field(description="second addend")


async def add(p: AddParams, call: ToolCall) -> dict[str, Any]:
    return {"sum": p.a + p.b}


class NoParams(BaseModel):
    pass


async def explode(p: NoParams, call: ToolCall) -> str:
    raise RuntimeError("kaboom")


async def refuse(p: NoParams, call: ToolCall) -> str:
    raise ToolError("the thing is not configured")


def agent_with_tools(app: App) -> Agent:
    registry = Registry(
        [
            Tool("add", "Add two integers", AddParams, add),
            Tool("explode", "Always crashes", NoParams, explode),
            Tool("refuse", "Always refuses", NoParams, refuse),
        ]
    )
    app.agent.registry = registry
    return app.agent


async def rows(app: App, model: type[Any]) -> list[Any]:
    async with app.session_factory() as s:
        return list((await s.execute(select(model).order_by(model.id))).scalars())


async def test_round_trip_stores_both_messages(app: App, fake_llm: FakeOpenAI) -> None:
    reply = await app.agent.handle(Incoming("hello there", telegram_user_id=42, user_name="Ann"))
    assert reply.text == "echo: hello there"
    msgs = await rows(app, Message)
    assert [(m.role, m.content) for m in msgs] == [
        ("user", "hello there"),
        ("assistant", "echo: hello there"),
    ]
    system = fake_llm.requests[0]["messages"][0]
    assert system["role"] == "system" and "Ann" in system["content"]


async def test_history_is_sent_on_the_next_message(app: App, fake_llm: FakeOpenAI) -> None:
    await app.agent.handle(Incoming("first", telegram_user_id=1))
    await app.agent.handle(Incoming("second", telegram_user_id=1))
    sent = [without_context(m["content"]) for m in fake_llm.requests[-1]["messages"][1:]]
    assert sent == ["first", "echo: first", "second"]


async def test_tool_call_then_answer_is_recorded(app: App, fake_llm: FakeOpenAI) -> None:
    agent = agent_with_tools(app)
    fake_llm.add(Calls([("add", {"a": 2, "b": 3})]), Text("five"))
    reply = await agent.handle(Incoming("2+3?", telegram_user_id=7))
    assert reply.text == "five" and reply.tool_calls == 1
    tool_msg = fake_llm.requests[1]["messages"][-1]
    assert tool_msg["role"] == "tool" and json.loads(tool_msg["content"]) == {"sum": 5}
    audit = await rows(app, ToolCallRecord)
    assert [(a.tool, a.ok) for a in audit] == [("add", True)]
    roles = [m.role for m in await rows(app, Message)]
    assert roles == ["user", "assistant", "tool", "assistant"]


async def test_bad_calls_become_error_results(app: App, fake_llm: FakeOpenAI) -> None:
    agent = agent_with_tools(app)
    fake_llm.add(
        Calls(
            [
                ("add", '{"a": 1,'),
                ("nope", {}),
                ("add", {"a": "x"}),
                ("explode", {}),
                ("refuse", {}),
            ]
        ),
        Text("recovered"),
    )
    reply = await agent.handle(Incoming("go", telegram_user_id=7))
    assert reply.text == "recovered"
    results = [m["content"] for m in fake_llm.requests[1]["messages"] if m["role"] == "tool"]
    assert "not valid JSON" in results[0]
    assert "unknown tool 'nope'" in results[1] and "add" in results[1]
    assert "invalid arguments" in results[2] and "b" in results[2]
    assert "explode failed: RuntimeError" in results[3] and "kaboom" not in results[3]
    assert "not configured" in results[4]
    audit = await rows(app, ToolCallRecord)
    assert [a.ok for a in audit] == [False] * 5


async def test_tool_call_cap_stops_the_task(
    app: App, fake_llm: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runner, "MAX_TOOL_CALLS", 3)
    agent = agent_with_tools(app)
    rounds = iter(range(1, 100))

    def more(body: object) -> Calls:  # new arguments each round: a repeat would end the turn
        n = next(rounds)
        return Calls([("add", {"a": n, "b": 1}), ("add", {"a": n, "b": 2})])

    fake_llm.responder = more
    reply = await agent.handle(Incoming("loop forever", telegram_user_id=7))
    assert reply.tool_calls == 3
    assert "after 3 tool calls" in reply.text
    audit = await rows(app, ToolCallRecord)
    assert sum(a.ok for a in audit) == 3 and len(audit) == 4  # the 4th was refused, not run
    # The cap is per message: the next message starts from zero.
    fake_llm.responder = lambda body: Text("ok")
    assert (await agent.handle(Incoming("again", telegram_user_id=7))).text == "ok"


async def test_provider_outage_then_recovery(app: App, fake_llm: FakeOpenAI) -> None:
    from bot.errors import ProviderError, public_text

    fake_llm.add(Error(503), Error(503), Error(503))
    try:
        await app.agent.handle(Incoming("are you there?", telegram_user_id=9))
    except ProviderError as exc:
        assert public_text(exc) == (
            "The model provider is not answering (HTTP 503); try again in a minute."
        )
    else:
        raise AssertionError("expected ProviderError")
    fake_llm.add(Error(429, retry_after=0.01), Text("back"))
    assert (await app.agent.handle(Incoming("now?", telegram_user_id=9))).text == "back"
    users = [m.content for m in await rows(app, Message) if m.role == "user"]
    assert users == ["are you there?", "now?"]  # stored before the model was asked
