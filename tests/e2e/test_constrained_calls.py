"""Replies held to "an answer or one valid call" (bot/llm/constrained.py), through the
assembled app: a server that says it is llama.cpp's (GET /props) gets the schema of every
reply with tools offered; the held call runs as a tool call, the held answer is what the
person reads (and its JSON never shows, not even in a draft). A server that says nothing is
not asked, and LLM_CONSTRAINED_CALLS forces it either way (auto by default)."""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from sqlalchemy import select

from tests.e2e.conftest import OWNER, TG
from tests.fakes.openai_server import FakeOpenAI, Text
from tools.memory.models import Memory
from tools.reminders.tool import HELD as SCHEDULE_HELD
from tools.tokens import count_schema

STORE = {"action": "store", "layer": "long", "content": "Sister is called Ana"}


def held(body: dict[str, Any]) -> dict[str, Any] | None:
    fmt = body.get("response_format")
    return fmt["json_schema"]["schema"] if fmt else None


def seen_by_user(tg: TG) -> list[str]:
    texts = [m.text or "" for m in tg.server.sent_to(OWNER)]
    return texts + [str(d.params.get("text") or "") for d in tg.server.drafts]


async def memories(tg: TG) -> list[str]:
    async with tg.app.session_factory() as s:
        return list((await s.execute(select(Memory.content).order_by(Memory.id))).scalars())


async def test_a_held_call_runs_and_the_held_answer_is_shown(
    make_tg: Callable[..., Awaitable[TG]], fake_llm: FakeOpenAI
) -> None:
    fake_llm.n_ctx = 32768  # /props answers as llama-server's does
    tg = await make_tg(llm_constrained_calls="auto")
    tg.llm.add(
        Text(json.dumps({"name": "memory", "arguments": STORE}, indent=1), chunk=5),
        Text('{"answer": "Noted: your sister is \\"Ana\\".\\nAnything else?"}', chunk=3),
    )
    await tg.send(OWNER, "Remember that my sister's name is Ana.")
    assert (await tg.reply(OWNER)).text == 'Noted: your sister is "Ana".\nAnything else?'
    await tg.idle()
    assert await memories(tg) == ["Sister is called Ana"]

    first, second = tg.llm.requests[:2]
    schema = held(first)
    assert schema is not None
    answer, *calls = schema["anyOf"]
    assert answer["required"] == ["answer"]
    offered = {t["function"]["name"]: t["function"]["parameters"] for t in first["tools"]}
    schemas = {c["properties"]["name"]["const"]: c["properties"]["arguments"] for c in calls}
    assert schemas == offered | {"schedule": SCHEDULE_HELD}  # its own stricter schema
    # Its result in hand, the reply is the answer.
    assert held(second) == {"anyOf": [answer]}

    # The call went back to the model as a proper tool call with its result.
    turn = [m for m in second["messages"] if m["role"] == "assistant" and m.get("tool_calls")]
    (call,) = turn[-1]["tool_calls"]
    assert call["function"]["name"] == "memory" and not turn[-1]["content"]
    assert json.loads(call["function"]["arguments"]) == STORE
    (result,) = [m for m in second["messages"] if m["role"] == "tool"]
    assert result["tool_call_id"] == call["id"] and result["content"].startswith("stored")
    for text in seen_by_user(tg):
        assert '"answer"' not in text and '"name"' not in text and "{" not in text, text


@pytest.mark.parametrize(("n_params", "holds"), [(1_540_000_000, True), (7_620_000_000, False)])
async def test_auto_holds_a_small_model_and_leaves_a_bigger_ones_native_calls(
    make_tg: Callable[..., Awaitable[TG]], fake_llm: FakeOpenAI, n_params: int, holds: bool
) -> None:
    # llama-server says its model's size in its model list (`meta.n_params`): a 7B model
    # calls tools natively and may chain rounds of them, which a held reply would cut to one.
    fake_llm.n_ctx, fake_llm.n_params = 32768, n_params
    tg = await make_tg()  # the default, auto
    await tg.send(OWNER, "hello")
    await tg.reply(OWNER)
    request = tg.llm.requests[0]
    assert request["tools"] and (held(request) is not None) is holds


async def test_a_server_that_does_not_say_is_not_held(
    make_tg: Callable[..., Awaitable[TG]],
) -> None:
    tg = await make_tg(llm_constrained_calls="auto")
    await tg.send(OWNER, "hello")
    assert (await tg.reply(OWNER)).text == "echo: hello"
    assert tg.llm.requests[0]["tools"] and held(tg.llm.requests[0]) is None


@pytest.mark.parametrize(
    ("setting", "says", "holds"), [("on", False, True), ("off", True, False), (None, True, True)]
)
async def test_the_setting_forces_it_on_and_off(
    make_tg: Callable[..., Awaitable[TG]],
    fake_llm: FakeOpenAI,
    setting: str | None,
    says: bool,
    holds: bool,
) -> None:
    fake_llm.n_ctx = 32768 if says else None
    tg = await make_tg(**({"llm_constrained_calls": setting} if setting else {}))
    tg.llm.add(Text('{"answer": "held"}' if holds else "free"))
    await tg.send(OWNER, "hello")
    assert (await tg.reply(OWNER)).text == ("held" if holds else "free")
    assert (held(tg.llm.requests[-1]) is not None) is holds


async def test_a_local_server_samples_tool_replies_at_temperature_0_even_unheld(
    make_tg: Callable[..., Awaitable[TG]], fake_llm: FakeOpenAI
) -> None:
    """At llama.cpp's default temperature (0.8) the 1.5B model stored the tool description's
    example "Lives in Berlin" for "Remember that my sister's name is Ana." (bench/tool_use.py,
    2026-12-06): with tools offered, a local server is asked for its likeliest reply, held
    or not; a server that does not say it is local is left at its own temperature."""
    fake_llm.n_ctx = 4096  # /props answers as llama-server's does
    tg = await make_tg(llm_constrained_calls="off")
    await tg.send(OWNER, "hello")
    assert (await tg.reply(OWNER)).text == "echo: hello"
    (first,) = tg.llm.requests
    assert first["tools"] and first["temperature"] == 0 and held(first) is None


async def test_a_server_not_known_as_local_keeps_its_temperature(
    make_tg: Callable[..., Awaitable[TG]],
) -> None:
    tg = await make_tg()
    await tg.send(OWNER, "hello")
    assert (await tg.reply(OWNER)).text == "echo: hello"
    assert tg.llm.requests[0]["tools"] and "temperature" not in tg.llm.requests[0]


def offered_calls(body: dict[str, Any]) -> set[str]:
    schema = held(body) or {"anyOf": []}
    return {c["properties"]["name"]["const"] for c in schema["anyOf"][1:]}


def storing_model(body: dict[str, Any]) -> Text:
    """Held, the 1.5B model after a store's result wrote the store again, or alternated two
    stores of one fact forty times, before it answered (bench/tool_use.py --day,
    2026-12-06): while the grammar lets it write a call, it does; else it answers."""
    messages = body["messages"]
    layer = "mid" if sum(m["role"] == "tool" for m in messages) % 2 else "short"
    if offered_calls(body):
        store = {"action": "store", "layer": layer, "content": "Anna lives in Porto"}
        return Text(json.dumps({"name": "memory", "arguments": store}))
    return Text('{"answer": "Noted: Anna lives in Porto."}')


async def held_app(
    make_tg: Callable[..., Awaitable[TG]],
    fake_llm: FakeOpenAI,
    model: Callable[[dict[str, Any]], Text],
) -> TG:
    """The app on a server that says it is llama.cpp's, its replies played by `model`."""
    fake_llm.n_ctx = 32768
    fake_llm.responder = model
    return await make_tg(llm_constrained_calls="auto")


async def test_held_results_in_hand_the_reply_is_the_answer(
    make_tg: Callable[..., Awaitable[TG]], fake_llm: FakeOpenAI
) -> None:
    tg = await held_app(make_tg, fake_llm, storing_model)
    await tg.send(OWNER, "Please remember that my sister Anna lives in Porto.")
    assert (await tg.reply(OWNER)).text == "Noted: Anna lives in Porto."
    assert await memories(tg) == ["Anna lives in Porto"]
    first, second = tg.llm.requests
    assert "memory" in offered_calls(first) and offered_calls(second) == set()

    # The next message may call tools again.
    await tg.send(OWNER, "And that she is a teacher.")
    await tg.reply(OWNER)
    assert "memory" in offered_calls(tg.llm.requests[2])


def correcting_model(body: dict[str, Any]) -> Text:
    """The schedule call with both times (recorded: the 1.5B's laundry reminder), then, told
    so, with one."""
    messages = body["messages"]
    results = [str(m["content"]) for m in messages if m["role"] == "tool"]
    arguments: dict[str, Any] = {"action": "create", "text": "Take the laundry out"}
    if not results:
        arguments |= {"at": "23:59", "in_minutes": 30}
    elif results[-1].startswith("Error") and "schedule" in offered_calls(body):
        arguments |= {"in_minutes": 30}
    else:
        return Text('{"answer": "I will remind you in 30 minutes."}')
    return Text(json.dumps({"name": "schedule", "arguments": arguments}))


async def test_held_a_call_that_failed_may_be_made_again_corrected(
    make_tg: Callable[..., Awaitable[TG]], fake_llm: FakeOpenAI
) -> None:
    tg = await held_app(make_tg, fake_llm, correcting_model)
    await tg.send(OWNER, "Remind me in 30 minutes to take the laundry out.")
    assert (await tg.reply(OWNER)).text == "I will remind you in 30 minutes."
    assert len(tg.llm.requests) == 3
    assert "schedule" in offered_calls(tg.llm.requests[1])
    assert offered_calls(tg.llm.requests[2]) == set()


ALL_TIMES = {  # the 1.5B's held call, recorded (bench/tool_use.py --day, 2026-12-06)
    "action": "create", "text": "Take the laundry out", "when": "in 2 minutes",
    "at": "2026-12-06T17:42+00:00", "in_minutes": 2, "every": "daily_at",
}  # fmt: skip


async def test_held_a_schedule_call_names_its_time_in_one_field(
    make_tg: Callable[..., Awaitable[TG]], fake_llm: FakeOpenAI
) -> None:
    """Held to the schema the model is shown, the 1.5B filled every time field of a
    reminder at once, was told so, and wrote the same call again: no reminder. Held to the
    schedule tool's own argument sets, a create names its time in one structured field,
    beside the person's words in `when`; the model is still shown the short schema (the
    prompt's tokens)."""
    fake_llm.n_ctx = 32768
    tg = await make_tg(llm_constrained_calls="auto")
    once = {k: v for k, v in ALL_TIMES.items() if k not in ("at", "every")}
    call = json.dumps({"name": "schedule", "arguments": once})
    tg.llm.add(Text(call), Text('{"answer": "Set."}'))
    await tg.send(OWNER, "Remind me in 2 minutes to take the laundry out.")
    assert (await tg.reply(OWNER)).text == "Set."

    first = tg.llm.requests[0]
    (tool,) = [t["function"] for t in first["tools"] if t["function"]["name"] == "schedule"]
    assert set(tool) == {"name", "description", "parameters"}  # no held schema shown
    assert "at" in tool["parameters"]["properties"]
    # Nor counted where the tools' tokens are (the planner's budget, /context).
    schedule = tg.app.registry.tools["schedule"].schema()
    assert count_schema(schedule) == count_schema({"type": "function", "function": tool})
    schema = held(first)
    assert schema is not None
    (call,) = [c for c in schema["anyOf"][1:] if c["properties"]["name"]["const"] == "schedule"]
    creates = [
        v for v in call["properties"]["arguments"]["anyOf"]
        if v["properties"]["action"] == {"const": "create"}
    ]  # fmt: skip
    times = {"at", "in_minutes", "every", "daily_at"}  # `when` (their words) may come too
    for variant in creates:
        assert variant["additionalProperties"] is False
        assert len(set(variant["required"]) & times) == 1, variant
        assert len(set(variant["properties"]) & times) == 1, variant
        assert "when" in variant["required"]  # their words, which the tool checks it against
    # The recorded call fits none of them.
    assert not any(set(ALL_TIMES) <= set(v["properties"]) for v in creates)
    # Nor a field's name written as another's value ("every": "daily_at", recorded), while
    # what the tool reads fits.
    (every,) = [v["properties"]["every"] for v in creates if "every" in v["properties"]]
    assert not re.fullmatch(every["pattern"].strip("^$"), "daily_at")
    assert re.fullmatch(every["pattern"].strip("^$"), "30m")
