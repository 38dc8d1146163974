"""The agent loop against the in-process scripted model: the loop's rules, quickly."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pydantic import BaseModel
from sqlalchemy import select

from bot.agent import runner
from bot.agent.runner import Agent, Incoming
from bot.app import App
from db.models import Message, ToolCallRecord
from tests.scripted_model import Call, Say, ScriptedModel
from tools.base import Tool, ToolCall
from tools.hooks import Always, Gates, HookRefusal, ModelRequest, Only, ToolRound, TurnHooks
from tools.registry import Registry
from tools.state import Slot


class Echo(BaseModel):
    word: str


async def echo(p: Echo, call: ToolCall) -> dict[str, Any]:
    return {"echoed": p.word, "user": call.ctx.user_id}


def scripted(app: App, model: ScriptedModel) -> Agent:
    agent = app.agent
    agent.llm = model
    agent.registry = Registry([Tool("echo", "Echo a word", Echo, echo)])
    return agent


async def test_tool_results_go_back_and_are_recorded_by_the_runtime(app: App) -> None:
    model = ScriptedModel()
    model.add(Call([("echo", {"word": "hi"}), ("echo", '{"word": 3}')]), Say("done"))
    reply = await scripted(app, model).handle(Incoming("go", telegram_user_id=7))
    assert reply.text == "done" and reply.tool_calls == 2
    tool_msgs = [m for m in model.requests[1] if m["role"] == "tool"]
    assert json.loads(tool_msgs[0]["content"])["echoed"] == "hi"
    assert "word" in tool_msgs[1]["content"]  # the bad argument is explained to the model
    async with app.session_factory() as s:
        records = list((await s.execute(select(ToolCallRecord))).scalars())
    assert [r.tool for r in records] == ["echo", "echo"]


async def test_the_turn_cap_ends_a_model_that_never_stops(
    app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(runner, "MAX_TOOL_CALLS", 3)
    model = ScriptedModel()
    model.add(*[Call([("echo", {"word": str(i)})]) for i in range(10)], Say("summary"))
    reply = await scripted(app, model).handle(Incoming("loop", telegram_user_id=7))
    assert "after 3 tool calls" in reply.text  # stopped at the cap
    assert len(model.requests) <= 4  # three tool rounds, then at most one closing answer


class RefuseSecondCall(TurnHooks):
    def __init__(self) -> None:
        self.seen: list[tuple[int, list[str]]] = []
        self.rounds: list[list[bool]] = []

    async def on_model_request(self, req: ModelRequest) -> None:
        self.seen.append((req.turn, [t["function"]["name"] for t in req.tools]))
        if req.turn == 1:
            raise HookRefusal("Over budget: no more model calls today.")

    async def on_tool_round(self, round_: ToolRound) -> None:
        self.rounds.append([o.ok for o in round_.outcomes])


async def test_a_hook_can_stop_a_request_before_a_model_call(app: App) -> None:
    model = ScriptedModel()
    model.add(Call([("echo", {"word": "x"}), ("nope", {})]), Say("never sent"))
    hook = RefuseSecondCall()
    agent = scripted(app, model)
    agent.requests = [Always(hook)]
    reply = await agent.handle(Incoming("go", telegram_user_id=8))
    assert reply.text == "Over budget: no more model calls today."
    assert len(model.requests) == 1  # the second call never reached the model
    assert hook.seen == [(0, ["echo"]), (1, ["echo"])]
    assert hook.rounds == [[True, False]]  # the unknown tool failed, the round was reported
    async with app.session_factory() as s:
        stored = list(
            (await s.execute(select(Message.role, Message.content).order_by(Message.id))).all()
        )
    assert stored[-1] == ("assistant", "Over budget: no more model calls today.")
    assert [r for r, _ in stored] == ["user", "assistant", "tool", "tool", "assistant"]


async def test_consecutive_messages_share_a_byte_identical_prefix(app: App) -> None:
    """Each request extends the previous one byte for byte: the system prompt, the tools,
    every earlier turn with the context block it was sent with, then the answer (a
    provider's prefix cache re-reads only the new turn)."""
    model = ScriptedModel()
    model.add(Say("one"), Say("two"), Say("three"))
    agent = scripted(app, model)
    base = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
    for i, text in enumerate(["first", "second", "third"]):
        agent.clock = lambda i=i: base + timedelta(minutes=7 * i)  # the time changes
        await agent.handle(Incoming(text, telegram_user_id=11))
    a, b = model.requests[1], model.requests[2]
    answered = [*a, {"role": "assistant", "content": "two"}]
    assert [json.dumps(m) for m in answered] == [json.dumps(m) for m in b[: len(answered)]]
    assert model.tools_seen[0] == model.tools_seen[1] == model.tools_seen[2]
    assert b[0]["role"] == "system" and "Now:" not in b[0]["content"]
    assert "Mon" in b[-1]["content"] and b[-1]["content"].endswith("third")
    # The previous turn keeps the time it was sent at.
    assert "09:07" in b[len(a) - 1]["content"] and b[len(a) - 1]["content"].endswith("second")


ECHOED: Slot[list[str]] = Slot("test.echoed", list)


async def echo_kept(p: Echo, call: ToolCall) -> str:
    call.ctx.state(ECHOED).append(p.word)
    return p.word


class EchoedNote(TurnHooks):
    """Applies only to a request whose echo tool ran (tools/hooks.py TurnHooks.when)."""

    when = (ECHOED,)

    def __init__(self) -> None:
        self.calls = 0

    def notes(self) -> str:
        self.calls += 1
        return "\n\nthe echo ran"


async def test_a_hook_declared_for_a_slot_runs_only_once_the_request_holds_it(app: App) -> None:
    model = ScriptedModel()
    model.add(Say("plain"), Call([("echo", {"word": "hi"})]), Say("done"))
    agent = scripted(app, model)
    agent.registry = Registry([Tool("echo", "Echo a word", Echo, echo_kept)])
    hook = EchoedNote()
    agent.requests = [Always(hook)]
    plain = await agent.handle(Incoming("hello", telegram_user_id=12))
    assert plain.text == "plain" and hook.calls == 0  # never asked: no echo ran
    echoed = await agent.handle(Incoming("echo hi", telegram_user_id=12))
    assert echoed.text.endswith("the echo ran") and hook.calls == 1


class Other(BaseModel):
    n: int


class RefuseAll:
    def __init__(self) -> None:
        self.asked: list[str] = []

    async def check(
        self, tool: Tool[Any], params: Any, args: dict[str, Any], call: ToolCall
    ) -> str | None:
        self.asked.append(tool.name)
        return "refused"


async def test_a_gate_for_some_tools_is_asked_about_their_calls_only(app: App) -> None:
    async def other(p: Other, call: ToolCall) -> str:
        return f"other {p.n}"

    model = ScriptedModel()
    model.add(Call([("echo", {"word": "hi"}), ("other", {"n": 1})]), Say("done"))
    agent = scripted(app, model)
    agent.registry = Registry(
        [Tool("echo", "Echo a word", Echo, echo), Tool("other", "Other", Other, other)]
    )
    refuse = RefuseAll()
    agent.gate = Gates([Only((Echo,), refuse)])
    await agent.handle(Incoming("go", telegram_user_id=13))
    results = [m["content"] for m in model.requests[1] if m["role"] == "tool"]
    assert refuse.asked == ["echo"]
    assert "refused" in results[0] and "other 1" in results[1]
