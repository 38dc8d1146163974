"""The streaming client (bot/llm/wire.py open_stream) against broken streams over real HTTP:
each gives a retry or one plain error, never the API key, and the client keeps working."""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from bot.errors import ProviderError, public_text
from bot.llm.client import LLMClient
from tests.conftest import make_settings
from tests.fakes.openai_server import Calls, Error, FakeOpenAI, KeepAlive, Text

KEY = "sk-test-secret-key-123456"  # the key make_settings gives the client


def _chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
    chunk = {
        "id": "chatcmpl-broken",
        "object": "chat.completion.chunk",
        "model": "fake-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return f"data: {json.dumps(chunk)}\n\n".encode()


@dataclass
class Broken:
    """A 200 streamed answer that goes wrong: `body` is sent as is, then the connection is
    cut (`cut`) or the body ends normally."""

    body: bytes
    cut: bool = False


@dataclass
class BrokenOpenAI(FakeOpenAI):
    """The fake model, with Broken answers queued before its usual script."""

    broken: list[Broken] = field(default_factory=list)

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        if not self.broken:
            return await super()._chat(request)
        self.requests.append(await request.json())
        turn = self.broken.pop(0)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(turn.body)
        if turn.cut:
            assert request.transport is not None
            request.transport.close()  # mid-body: no chunked-encoding terminator
            return resp
        await resp.write_eof()
        return resp


@pytest.fixture
async def broken_llm() -> Any:
    server = await BrokenOpenAI().start()
    yield server
    await server.stop()


def client(tmp_path: Path, server: FakeOpenAI, **extra: Any) -> LLMClient:
    settings = make_settings(tmp_path, server, **extra)
    return LLMClient(settings, retry_base_delay=0.01, retry_max_delay=0.02)


TRUNCATED = Broken(_chunk({"role": "assistant", "content": ""}) + _chunk({"content": "Hal"}), True)
NOT_JSON = Broken(_chunk({"content": "Hal"}) + b"data: {not json\n\n")
ERROR_EVENT = Broken(
    _chunk({"content": "Hal"})
    + f"data: {json.dumps({'error': {'message': f'overloaded ({KEY})'}})}\n\n".encode()
)


async def test_truncated_stream_is_retried(tmp_path: Path, broken_llm: BrokenOpenAI) -> None:
    broken_llm.broken.append(TRUNCATED)
    broken_llm.add(Text("Hello again"))
    seen: list[str] = []

    async def on_text(text: str) -> None:
        seen.append(text)

    llm = client(tmp_path, broken_llm)
    out = await llm.stream([{"role": "user", "content": "hi"}], None, on_text)
    await llm.close()
    assert out.content == "Hello again" and len(broken_llm.requests) == 2
    assert seen[0] == "Hal" and seen[-1] == "Hello again"  # the retry's text replaces it


async def test_truncated_every_time_is_one_plain_error(
    tmp_path: Path, broken_llm: BrokenOpenAI
) -> None:
    broken_llm.broken.extend([TRUNCATED] * 3)
    llm = client(tmp_path, broken_llm)
    with pytest.raises(ProviderError) as info:
        await llm.stream([{"role": "user", "content": "hi"}])
    assert len(broken_llm.requests) == 3  # MAX_RETRIES=2 (tests/conftest.py)
    assert public_text(info.value) == (
        "The model provider is not answering (connection failed); try again in a minute."
    )
    # The same client (and its connection pool) still answers.
    out = await llm.stream([{"role": "user", "content": "still there?"}])
    await llm.close()
    assert out.content == "echo: still there?"


async def test_non_json_line_is_retried_then_reported(
    tmp_path: Path, broken_llm: BrokenOpenAI
) -> None:
    broken_llm.broken.append(NOT_JSON)
    llm = client(tmp_path, broken_llm)
    out = await llm.stream([{"role": "user", "content": "hi"}])
    assert out.content == "echo: hi" and len(broken_llm.requests) == 2

    broken_llm.broken.extend([NOT_JSON] * 3)
    with pytest.raises(ProviderError) as info:
        await llm.stream([{"role": "user", "content": "hi"}])
    await llm.close()
    assert "not answering (malformed stream)" in public_text(info.value)


async def test_error_event_mid_stream(
    tmp_path: Path, broken_llm: BrokenOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    broken_llm.broken.append(ERROR_EVENT)
    llm = client(tmp_path, broken_llm)
    with caplog.at_level(logging.DEBUG):
        with pytest.raises(ProviderError) as info:
            await llm.stream([{"role": "user", "content": "hi"}])
        # Not retried (the provider answered and said no), and the next call works.
        assert len(broken_llm.requests) == 1
        out = await llm.stream([{"role": "user", "content": "next"}])
    await llm.close()
    assert out.content == "echo: next"
    text = public_text(info.value)
    assert (
        text == "The model provider is not answering (error in the stream); try again in a minute."
    )
    assert KEY not in str(info.value) and KEY not in text
    assert all(KEY not in r.getMessage() for r in caplog.records)


async def test_error_event_goes_to_the_fallback_model(
    tmp_path: Path, broken_llm: BrokenOpenAI
) -> None:
    broken_llm.broken.append(ERROR_EVENT)
    llm = client(tmp_path, broken_llm, llm_fallback_model="backup-model")
    out = await llm.stream([{"role": "user", "content": "hi"}])
    await llm.close()
    assert out.content == "echo: hi" and out.model == "backup-model"
    assert out.fallback_from == "fake-model"
    assert [r["model"] for r in broken_llm.requests] == ["fake-model", "backup-model"]


async def test_500_then_200_and_the_request_sent(tmp_path: Path, broken_llm: BrokenOpenAI) -> None:
    broken_llm.add(Error(500), Calls([("search", {"query": "x"})], text="Looking"))
    llm = client(tmp_path, broken_llm)
    tools = [{"type": "function", "function": {"name": "search", "parameters": {}}}]
    out = await llm.stream([{"role": "user", "content": "héllo"}], tools)
    await llm.close()
    assert len(broken_llm.requests) == 2 and out.content == "Looking"
    assert [(c.name, json.loads(c.arguments)) for c in out.tool_calls] == [
        ("search", {"query": "x"})
    ]
    assert out.finish_reason == "tool_calls" and out.usage is not None
    body = broken_llm.requests[-1]
    assert body["stream"] is True and body["tools"] == tools
    assert body["messages"] == [{"role": "user", "content": "héllo"}]


async def test_a_last_event_without_its_blank_line(
    tmp_path: Path, broken_llm: BrokenOpenAI
) -> None:
    """A body that ends without [DONE] or the final blank line gives the text of its whole
    events; the unterminated last one is dropped, as the SSE spec says."""
    body = _chunk({"content": "Hello"}) + _chunk({}, "stop").rstrip(b"\n")
    broken_llm.broken.append(Broken(body.replace(b"\n\n", b"\r\n\r\n", 1)))
    llm = client(tmp_path, broken_llm)
    out = await llm.stream([{"role": "user", "content": "hi"}])
    await llm.close()
    assert out.content == "Hello" and out.finish_reason is None


async def test_keep_alives_forever_end_at_the_deadline(
    tmp_path: Path, broken_llm: BrokenOpenAI
) -> None:
    """LLM_TIMEOUT_S bounds the whole call, retries included, not each read: a server that
    sends keep-alive comments and never an answer is given up at the deadline, in one line."""
    broken_llm.add(*[KeepAlive(every=0.05)] * 5)
    llm = client(tmp_path, broken_llm, llm_timeout_s=1.0)
    async with asyncio.timeout(60):  # a per-read timeout alone would never fire: fail, not hang
        with pytest.raises(ProviderError) as info:
            await llm.stream([{"role": "user", "content": "hi"}])
    await llm.close()
    text = public_text(info.value)
    assert "LLM_TIMEOUT_S (1 s)" in text and text.count("\n") == 0
    broken_llm.script.clear()  # the retries the deadline left no time for
    llm = client(tmp_path, broken_llm)
    assert (await llm.stream([{"role": "user", "content": "next"}])).content == "echo: next"
    await llm.close()


@dataclass
class CookieOpenAI(FakeOpenAI):
    """The fake model behind a proxy that sets a cookie and expects it back."""

    seen: list[dict[str, str]] = field(default_factory=list)

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        self.seen.append(dict(request.headers))
        await request.read()
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        resp.set_cookie("affinity", "node-7")
        await resp.prepare(request)
        await resp.write(_chunk({"role": "assistant", "content": "ok"}, "stop"))
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp


async def test_the_request_carries_our_headers_and_the_providers_cookie(
    tmp_path: Path,
) -> None:
    server = await CookieOpenAI().start()
    try:
        llm = client(tmp_path, server)
        for _ in range(2):
            assert (await llm.stream([{"role": "user", "content": "hi"}], None)).content == "ok"
        await llm.close()
    finally:
        await server.stop()
    first, second = server.seen
    assert first["Authorization"] == f"Bearer {KEY}"
    assert first["Content-Type"] == "application/json"
    assert first["User-Agent"].startswith("Sidekick")
    assert "Cookie" not in first
    assert second["Cookie"] == "affinity=node-7"


async def test_a_connection_the_provider_closed_while_idle_is_not_reused() -> None:
    """httpx's pool must see a server's hang-up: the second request goes out on a new
    connection instead of failing on the dead one."""
    from bot.llm.wire import Endpoint, open_stream

    connections = 0
    body = b'data: {"choices":[{"delta":{"content":"ok"}}]}\n\ndata: [DONE]\n\n'
    answer = (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body
    )

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
        await reader.readexactly(length)
        writer.write(answer)
        await writer.drain()
        writer.close()  # keep-alive as far as the client knows, then hung up

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    endpoint = Endpoint(f"http://127.0.0.1:{port}/v1", KEY, 5)
    try:
        for _ in range(2):
            events = await open_stream(endpoint, {"model": "m", "messages": [], "stream": True})
            got = [event async for event in events]
            assert got == [{"choices": [{"delta": {"content": "ok"}}]}]
            await asyncio.sleep(0.05)  # the hang-up reaches the client's socket
    finally:
        await endpoint.aclose()
        server.close()
        await server.wait_closed()
    assert connections == 2


async def test_a_server_still_reading_the_prompt_is_waited_for_not_asked_again(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    """Before its first event a try may be silent for the whole call: llama-server sends
    nothing while it reads a long prompt (minutes on a CPU), and asking again would read it
    again from the start. Once a stream has begun, the silence limit holds (stalls retry)."""
    reading = asyncio.Event()
    fake_llm.add(Text("read it all", after=reading))
    llm = client(tmp_path, fake_llm, llm_timeout_s=60.0)
    llm.silence = 0.2  # the stall limit of a stream that has begun
    asyncio.get_running_loop().call_later(1.0, reading.set)
    out = await llm.stream([{"role": "user", "content": "a long prompt"}])
    await llm.close()
    assert out.content == "read it all"
    assert len(fake_llm.requests) == 1  # not asked a second time while it read


async def test_a_stream_that_goes_quiet_past_the_limit_is_asked_again_one_that_flows_is_not(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    """Once a stream has begun, the silence since its last event is what counts: a try that
    stops sending for longer than the limit ends as stalled and the model is asked again; a
    stream whose every gap is under the limit runs on, however long it takes in all."""
    fake_llm.add(Text("cut off", chunk=3, pause=1.0), Text("asked again"))
    llm = client(tmp_path, fake_llm, llm_timeout_s=60.0)
    llm.silence = 0.3
    out = await llm.stream([{"role": "user", "content": "hi"}])
    assert out.content == "asked again"
    assert len(fake_llm.requests) == 2

    flowing = "a slow and steady answer"  # 24 deltas 0.05 s apart: 1.2 s in all
    fake_llm.add(Text(flowing, chunk=1, delay=0.05))
    out = await llm.stream([{"role": "user", "content": "hi"}])
    await llm.close()
    assert out.content == flowing
    assert len(fake_llm.requests) == 3
