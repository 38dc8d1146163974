"""The agent loop's failure paths as a Telegram user sees them."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel
from sqlalchemy import select

from bot.agent import runner
from bot.agent.prompt import without_context
from bot.app import App
from db.models import ToolCallRecord
from tests.e2e.conftest import OWNER, TG
from tests.fakes.openai_server import Calls, Error, Text
from tools.base import Tool, ToolCall
from tools.registry import Registry


class AddParams(BaseModel):
    a: int
    b: int


async def add(p: AddParams, call: ToolCall) -> dict[str, Any]:
    return {"sum": p.a + p.b}


def with_add_tool(app: App) -> None:
    app.agent.registry = Registry([Tool("add", "Add two integers", AddParams, add)])


def tool_results(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


async def audit(app: App) -> list[ToolCallRecord]:
    async with app.session_factory() as s:
        rows = await s.execute(select(ToolCallRecord).order_by(ToolCallRecord.id))
        return list(rows.scalars())


async def test_tool_call_round_trip_shows_typing(tg: TG) -> None:
    with_add_tool(tg.app)
    tg.llm.add(Calls([("add", {"a": 2, "b": 3})]), Text("The sum is 5."))
    await tg.send(OWNER, "add 2 and 3")
    assert (await tg.reply(OWNER)).text == "The sum is 5."
    assert tool_results(tg.llm.requests[1]) == ['{"sum": 5}']
    assert any(c.params.get("action") == "typing" for c in tg.server.actions)


async def test_tool_call_cap_stops_the_task(make_tg: Any, monkeypatch: Any) -> None:
    monkeypatch.setattr(runner, "MAX_TOOL_CALLS", 3)
    tg: TG = await make_tg()
    with_add_tool(tg.app)
    n = iter(range(100))
    # A new sum each time: the same call again would end the turn with its first result.
    tg.llm.responder = lambda body: Calls([("add", {"a": next(n), "b": 1})])
    await tg.send(OWNER, "loop forever")
    reply = await tg.reply(OWNER)
    assert "stopped this task after 3 tool calls" in reply.text
    assert len(tg.llm.requests) == 3
    assert len(await audit(tg.app)) == 3


async def test_invalid_arguments_and_unknown_tool_go_back_to_the_model(tg: TG) -> None:
    with_add_tool(tg.app)
    tg.llm.add(
        Calls([("add", '{"a": 1, "b": ')]),  # broken JSON
        Calls([("add", {"a": "one", "b": 2})]),  # fails the schema
        Calls([("teleport", {"to": "Mars"})]),  # no such tool
        Text("Sorry, I could not do that."),
    )
    await tg.send(OWNER, "do something odd")
    assert (await tg.reply(OWNER)).text == "Sorry, I could not do that."
    results = [tool_results(tg.llm.requests[i])[-1] for i in (1, 2, 3)]
    assert "JSON" in results[0] or "json" in results[0]
    assert "a" in results[1] and "integer" in results[1].lower()
    assert "teleport" in results[2] and "add" in results[2]
    records = await audit(tg.app)
    assert [r.ok for r in records] == [False, False, False]


async def test_provider_outage_then_recovery(tg: TG) -> None:
    tg.llm.add(Error(503), Error(503), Error(503))  # retries are 2: three failures in a row
    await tg.send(OWNER, "are you there?")
    notice, reply = await tg.replies(OWNER, 2)  # told it is waited out, then answered
    assert notice.text == (
        "The model provider is not answering (HTTP 503) right now. I have your message and "
        "will answer it as soon as the provider is back."
    )
    assert reply.text == "echo: are you there?"
    await tg.send(OWNER, "and now?")
    assert (await tg.reply(OWNER)).text == "echo: and now?"
    # The waited-for message and its answer are in the history afterwards.
    contents = [
        without_context(m["content"])
        for m in tg.llm.requests[-1]["messages"]
        if m["role"] == "user"
    ]
    assert contents == ["are you there?", "and now?"]
