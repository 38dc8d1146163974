"""bot/llm/constrained.py: the reply schema, the answer read while it streams and when done,
and which servers are asked to hold replies (llama.cpp's /props, Ollama's /api/version, a
refusal remembered), against small local servers."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from bot.llm.client import LLMClient
from bot.llm.constrained import Constraint, adopt, answer_so_far, drafts, reply_schema
from bot.llm.wire import Endpoint
from tests.conftest import make_settings
from tests.fakes.openai_server import FakeOpenAI, Text
from tools.chat import Completion

TOOLS = [
    {"type": "function", "function": {"name": "memory", "parameters": {"type": "object"}}},
    {"type": "function", "function": {"name": "code", "parameters": {"type": "object"}}},
]


def test_the_schema_is_an_answer_or_a_call_of_each_offered_tool() -> None:
    schema = reply_schema(TOOLS)
    answer, *calls = schema["anyOf"]
    assert answer["properties"] == {"answer": {"type": "string"}}
    assert [c["properties"]["name"] for c in calls] == [{"const": "memory"}, {"const": "code"}]
    assert all(c["required"] == ["name", "arguments"] for c in calls)
    assert all(not c["additionalProperties"] for c in schema["anyOf"])


@pytest.mark.parametrize(
    ("streamed", "shown"),
    [
        ('{"ans', None),
        ('{\n  "answer": "', ""),
        ('{"answer": "Hel', "Hel"),
        ('{"answer": "a \\"b\\" c\\', 'a "b" c'),  # an escape not finished yet
        ('{"answer": "caf\\u00e', "caf"),
        ('{"answer": "caf\\u00e9 ok", ', "café ok"),
        ('{"answer": "x \\ud83d', "x "),  # half a surrogate pair waits for its second
        ('{"answer": "x \\ud83d\\ude00"}', "x 😀"),
        ('{"name": "memory", "arguments": {', None),
    ],
)
def test_the_answer_while_it_streams(streamed: str, shown: str | None) -> None:
    assert answer_so_far(streamed) == shown


async def test_drafts_show_the_answer_never_the_json_and_pass_free_text_on() -> None:
    seen: list[str] = []

    async def show(text: str) -> None:
        seen.append(text)

    draft = drafts(show)
    assert draft is not None
    for piece in ('{"name": "code"', '{"answer": "', '{"answer": "Hi', '{"answer": "Hi!"}'):
        await draft(piece)
    await draft("plain prose")  # a server that did not hold the reply
    assert seen == ["Hi", "Hi!", "plain prose"]


def completion(text: str, finish: str = "stop") -> Completion:
    return Completion(content=text, finish_reason=finish)


def test_a_held_answer_becomes_the_text() -> None:
    out = completion('{"answer": "It is 42."}')
    assert adopt(out, {"code"}) and out.content == "It is 42." and not out.tool_calls


def test_a_held_call_becomes_the_tool_call() -> None:
    out = completion('{"name": "code", "arguments": {"code": "print(6*7)"}}')
    assert adopt(out, {"code"})
    (call,) = out.tool_calls
    assert call.name == "code" and json.loads(call.arguments) == {"code": "print(6*7)"}
    assert call.id and out.content == "" and out.finish_reason == "tool_calls"
    assert out.written == 0  # sent as a call, not written out as text


def test_cut_at_the_output_limit() -> None:
    answer = completion('{"answer": "a long ans', "length")
    assert adopt(answer, {"code"}) and answer.content == "a long ans"
    call = completion('{"name": "code", "arguments": {"code": "pri', "length")
    assert adopt(call, {"code"}) and call.content == "" and call.cut_call and not call.tool_calls


@pytest.mark.parametrize(
    "text",
    [
        "Plain prose the server did not hold.",
        '{"name": "search", "arguments": {}}',  # a tool not offered
        '{"answer": "x", "extra": 1}',
        "[1, 2]",
    ],
)
def test_what_is_no_held_reply_is_left_as_it_is(text: str) -> None:
    out = completion(text)
    assert not adopt(out, {"code"}) and out.content == text and not out.tool_calls


class Server:
    def __init__(self, routes: dict[str, tuple[int, Any]]) -> None:
        self.routes = routes
        self.asked: list[str] = []
        self.runner: web.AppRunner | None = None
        self.base_url = ""

    async def _any(self, request: web.Request) -> web.Response:
        self.asked.append(request.path)
        status, body = self.routes.get(request.path, (404, {"error": "not found"}))
        return web.json_response(body, status=status)

    async def __aenter__(self) -> Server:
        app = web.Application()
        app.router.add_get("/{tail:.*}", self._any)
        self.runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", 0).start()
        self.base_url = f"http://127.0.0.1:{self.runner.addresses[0][1]}/v1"
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self.runner is not None
        await self.runner.cleanup()


@pytest.fixture
async def endpoint() -> AsyncIterator[Any]:
    made: list[Endpoint] = []

    def make(url: str) -> Endpoint:
        made.append(Endpoint(url, "key", 10.0))
        return made[-1]

    yield make
    for e in made:
        await e.aclose()


LLAMA = {"/props": (200, {"default_generation_settings": {"n_ctx": 4096}})}


async def unsaid() -> int | None:
    """A model whose size the server does not say (held, as a small one)."""
    return None


@pytest.mark.parametrize(
    ("routes", "holds"),
    [
        (LLAMA, True),
        ({"/api/version": (200, {"version": "0.6.2"})}, True),
        ({"/api/version": (200, {"version": "0.4.7"})}, False),  # before structured outputs
        ({}, False),  # a cloud provider: neither question answered
    ],
)
async def test_auto_asks_each_server_once(
    endpoint: Any, routes: dict[str, tuple[int, Any]], holds: bool
) -> None:
    async with Server(routes) as server:
        at = endpoint(server.base_url)
        constraint = Constraint("auto")
        assert await constraint.wanted(at, unsaid) is holds
        asked = len(server.asked)
        assert await constraint.wanted(at, unsaid) is holds and len(server.asked) == asked


async def test_a_loading_server_is_asked_again_and_a_refusal_is_kept(endpoint: Any) -> None:
    async with Server({"/props": (503, {"error": {"message": "Loading model"}})}) as server:
        at = endpoint(server.base_url)
        constraint = Constraint("auto")
        assert not await constraint.wanted(at, unsaid)
        server.routes.update(LLAMA)
        assert await constraint.wanted(at, unsaid)
        constraint.refused(at)
        assert not await constraint.wanted(at, unsaid)


async def test_on_and_off_ask_nothing(endpoint: Any) -> None:
    async with Server(LLAMA) as server:
        at = endpoint(server.base_url)
        assert await Constraint("on").wanted(at, unsaid)
        assert not await Constraint("off").wanted(at, unsaid)
        assert server.asked == []


@pytest.mark.parametrize(
    ("mode", "routes", "plan"),
    [
        ("auto", {}, (False, False)),
        ("off", {}, (False, False)),
        ("on", {}, (True, False)),
        ("auto", LLAMA, (True, True)),
        ("off", LLAMA, (False, True)),
    ],
)
async def test_a_server_whose_requests_need_nothing_is_free(
    endpoint: Any, mode: str, routes: dict[str, tuple[int, Any]], plan: tuple[bool, bool]
) -> None:
    """Only a server that is not local, whose replies are not held, goes free (the client
    asks nothing more for it); one held by `on` goes free once it refuses the field."""
    async with Server(routes) as server:
        at = endpoint(server.base_url)
        constraint = Constraint(mode)
        assert await constraint.plan(at, unsaid) == plan
        assert (at.base_url in constraint.free) is (plan == (False, False))
        constraint.refused(at)
        assert (at.base_url in constraint.free) is (not plan[1])


async def test_a_server_that_refuses_the_field_gets_the_request_again_without_it(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    fake_llm.reject_response_format = True
    llm = LLMClient(make_settings(tmp_path, fake_llm, llm_constrained_calls="on"))
    try:
        for text in ("first", "second"):
            fake_llm.add(Text(text))
            out = await llm.stream([{"role": "user", "content": "hi"}], TOOLS)
            assert out.content == text
    finally:
        await llm.close()
    # The first request, refused, then each one without the field.
    assert ["response_format" in r for r in fake_llm.requests] == [True, False, False]
