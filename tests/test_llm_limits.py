"""The bounds of one model call: at most LLM_MAX_OUTPUT_TOKENS on every call (the chat, the
archive summariser and the code generator alike), a reply cut there says so, a refused
optional field is dropped or renamed once, every provider error body is logged once and
masked, and the model's context is read from the servers that tell it."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from bot.agent.runner import Incoming
from bot.app import build_app
from bot.errors import ProviderError, public_text
from bot.llm.client import LLMClient
from tests.conftest import make_settings
from tests.fakes.openai_server import Error, FakeOpenAI, Text

KEY = "sk-test-secret-key-123456"  # the key make_settings gives the client


def client(tmp_path: Path, server: Any, **extra: Any) -> LLMClient:
    settings = make_settings(tmp_path, server, **extra)
    return LLMClient(settings, retry_base_delay=0.01, retry_max_delay=0.02)


@pytest.mark.db
async def test_every_call_is_bounded_and_a_cut_reply_says_so(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    settings = make_settings(tmp_path, fake_llm, llm_max_output_tokens=300)
    app = await build_app(settings, llm=LLMClient(settings, retry_base_delay=0.01))
    try:
        fake_llm.add(Text("A long story that goes on", finish="length"))
        reply = await app.agent.handle(Incoming("tell me a story", telegram_user_id=42))
        # What tools and the archive use: the metered model over the same client.
        await app.deps.llm.complete_text([{"role": "user", "content": "sum up"}], max_tokens=600)
        await app.deps.llm.complete_text([{"role": "user", "content": "short"}], max_tokens=100)
    finally:
        await app.close()
    assert reply.text.startswith("A long story that goes on")
    assert reply.text.count("LLM_MAX_OUTPUT_TOKENS") == 1
    assert [r["max_tokens"] for r in fake_llm.requests] == [300, 300, 100]


async def test_max_completion_tokens_where_the_server_asks_for_it(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    """OpenAI's reasoning models refuse max_tokens: renamed once, for every later call."""
    said = "Unsupported parameter: 'max_tokens' is not supported with this model. "
    fake_llm.add(Error(400, said + "Use 'max_completion_tokens' instead."))
    llm = client(tmp_path, fake_llm)
    await llm.stream([{"role": "user", "content": "hi"}])
    await llm.complete([{"role": "user", "content": "hi"}])
    await llm.close()
    sent = [("max_tokens" in r, "max_completion_tokens" in r) for r in fake_llm.requests]
    assert sent == [(True, False), (False, True), (False, True)]


async def test_stream_options_refused_with_422(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    """Mistral answers 422 to stream_options: dropped once, and the answer still comes."""
    fake_llm.add(Error(422, "stream_options: Extra inputs are not permitted"))
    llm = client(tmp_path, fake_llm)
    out = await llm.stream([{"role": "user", "content": "hi"}])
    await llm.stream([{"role": "user", "content": "again"}])
    await llm.close()
    assert out.content == "echo: hi" and not llm.ask_usage
    assert ["stream_options" in r for r in fake_llm.requests] == [True, False, False]


async def test_a_provider_error_body_is_logged_once_masked(
    tmp_path: Path, fake_llm: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    fake_llm.add(Error(400, f"bad header Authorization: Bearer {KEY}"))
    llm = client(tmp_path, fake_llm)
    with caplog.at_level(logging.WARNING), pytest.raises(ProviderError):
        await llm.stream([{"role": "user", "content": "hi"}])
    await llm.close()
    lines = [r.getMessage() for r in caplog.records if "bad header" in r.getMessage()]
    assert len(lines) == 1 and "HTTP 400" in lines[0]
    assert KEY not in lines[0] and "Bearer [secret]" in lines[0]


class ContextServer:
    """/props as llama.cpp answers it, or /api/show as Ollama does (and a 404 for the other)."""

    def __init__(self, kind: str, loading: int = 0) -> None:
        self.kind = kind
        self.loading = loading  # requests answered 503 first, as llama-server loading a model
        self.asked: list[str] = []
        self.runner: web.AppRunner | None = None
        self.base_url = ""

    async def _props(self, request: web.Request) -> web.Response:
        self.asked.append(request.path)
        if self.loading:
            self.loading -= 1
            err = {"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}}
            return web.json_response(err, status=503)
        if self.kind != "llama.cpp":
            return web.json_response({"error": "not found"}, status=404)
        return web.json_response({"default_generation_settings": {"n_ctx": 4096}})

    async def _models(self, request: web.Request) -> web.Response:
        self.asked.append(request.path)
        return web.json_response({"object": "list", "data": [{"id": "fake-model"}]})

    async def _show(self, request: web.Request) -> web.Response:
        self.asked.append(request.path)
        body = await request.json()
        info = {"general.architecture": "qwen2", "qwen2.context_length": 32768}
        return web.json_response({"model_info": info, "parameters": "", "m": body["model"]})

    async def __aenter__(self) -> ContextServer:
        app = web.Application()
        app.router.add_get("/props", self._props)
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/api/show", self._show)
        self.runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.base_url = f"http://127.0.0.1:{self.runner.addresses[0][1]}/v1"
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self.runner is not None
        await self.runner.cleanup()


@pytest.fixture
async def llama() -> AsyncIterator[ContextServer]:
    async with ContextServer("llama.cpp") as server:
        yield server


async def test_context_from_llama_cpp_props_once(tmp_path: Path, llama: ContextServer) -> None:
    llm = client(tmp_path, llama)
    assert await llm.context_tokens() == 4096
    assert await llm.context_tokens() == 4096
    await llm.close()
    assert llama.asked == ["/props"]  # asked once per model


async def test_a_server_still_loading_its_model_is_asked_again(tmp_path: Path) -> None:
    async with ContextServer("llama.cpp", loading=1) as server:
        llm = client(tmp_path, server)
        assert await llm.context_tokens() is None  # not known yet: not "unknown" for good
        assert await llm.context_tokens() == 4096
        assert await llm.context_tokens() == 4096
        await llm.close()
    assert server.asked == ["/props", "/props"]


async def test_context_from_ollama_show(tmp_path: Path) -> None:
    async with ContextServer("ollama") as server:
        llm = client(tmp_path, server)
        assert await llm.context_tokens() == 32768
        await llm.close()
    assert server.asked == ["/props", "/v1/models", "/api/show"]


async def test_context_setting_wins_and_unknown_is_none(
    tmp_path: Path, llama: ContextServer, fake_llm: FakeOpenAI
) -> None:
    llm = client(tmp_path, llama, llm_context_tokens=8000)
    assert await llm.context_tokens() == 8000
    await llm.close()
    assert llama.asked == []
    llm = client(tmp_path, fake_llm)  # an OpenAI-like server: it does not say
    assert await llm.context_tokens() is None
    await llm.close()


OVERFLOWS = [
    # OpenAI (code context_length_exceeded); vLLM and DeepSeek word it the same way
    "This model's maximum context length is 128000 tokens. However, your messages resulted "
    "in 130412 tokens. Please reduce the length of the messages.",
    # Mistral
    "Prompt contains 40000 tokens and 0 draft tokens, too large for model with 32768 "
    "maximum context length",
    # Gemini's OpenAI endpoint
    "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
]


@pytest.mark.parametrize("said", OVERFLOWS)
async def test_overflow_wordings_are_told_in_one_sentence(
    tmp_path: Path, fake_llm: FakeOpenAI, said: str
) -> None:
    fake_llm.add(Error(400, said))
    llm = client(tmp_path, fake_llm)
    with pytest.raises(ProviderError) as info:
        await llm.stream([{"role": "user", "content": "hi"}])
    await llm.close()
    assert len(fake_llm.requests) == 1 and "/newsession" in public_text(info.value)


async def test_another_400_is_not_an_overflow(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    fake_llm.add(Error(400, "Invalid 'messages[1].content': string too long."))
    llm = client(tmp_path, fake_llm)
    with pytest.raises(ProviderError) as info:
        await llm.stream([{"role": "user", "content": "hi"}])
    await llm.close()
    assert public_text(info.value) == "The model provider rejected the request (HTTP 400)."
