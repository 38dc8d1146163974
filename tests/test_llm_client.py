"""The LLM client over real HTTP: streaming tool calls, retries, and plain errors."""

from __future__ import annotations

import itertools
import json

import pytest

from bot.config import Settings
from bot.errors import ProviderError, public_text
from bot.llm.client import LLMClient
from tests.fakes.openai_server import Calls, Error, FakeOpenAI, Text


def client(settings: Settings) -> LLMClient:
    return LLMClient(settings, retry_base_delay=0.01, retry_max_delay=0.02)


async def test_streams_text_and_reports_progress(settings: Settings, fake_llm: FakeOpenAI) -> None:
    fake_llm.add(Text("Hello, streaming world!", chunk=4))
    seen: list[str] = []

    async def on_text(text: str) -> None:
        seen.append(text)

    llm = client(settings)
    out = await llm.stream([{"role": "user", "content": "hi"}], None, on_text)
    await llm.close()
    assert out.content == "Hello, streaming world!" and out.finish_reason == "stop"
    assert seen[-1] == out.content and len(seen) > 3
    assert all(b.startswith(a) for a, b in itertools.pairwise(seen))


async def test_assembles_parallel_tool_calls(settings: Settings, fake_llm: FakeOpenAI) -> None:
    args = {"query": "weather in Paris", "max_results": 3}
    fake_llm.add(Calls([("search", args), ("code", {"action": "execute", "code": "1+1"})]))
    llm = client(settings)
    out = await llm.stream([{"role": "user", "content": "hi"}], [])
    await llm.close()
    assert [c.name for c in out.tool_calls] == ["search", "code"]
    assert json.loads(out.tool_calls[0].arguments) == args
    assert all(c.id.startswith("call_") for c in out.tool_calls)


async def test_retries_then_succeeds(settings: Settings, fake_llm: FakeOpenAI) -> None:
    fake_llm.add(Error(500), Error(429, retry_after=0.01), Text("fine"))
    llm = client(settings)
    out = await llm.stream([{"role": "user", "content": "hi"}])
    await llm.close()
    assert out.content == "fine" and len(fake_llm.requests) == 3


async def test_gives_up_with_plain_message(settings: Settings, fake_llm: FakeOpenAI) -> None:
    fake_llm.add(*[Error(502)] * 5)
    llm = client(settings)
    with pytest.raises(ProviderError) as info:
        await llm.stream([{"role": "user", "content": "hi"}])
    await llm.close()
    assert len(fake_llm.requests) == llm.max_retries + 1
    assert public_text(info.value) == (
        "The model provider is not answering (HTTP 502); try again in a minute."
    )


async def test_client_errors_are_not_retried(settings: Settings, fake_llm: FakeOpenAI) -> None:
    fake_llm.add(Error(401, "bad key sk-test-secret-key-123456"))
    llm = client(settings)
    with pytest.raises(ProviderError) as info:
        await llm.complete_text([{"role": "user", "content": "hi"}])
    await llm.close()
    assert len(fake_llm.requests) == 1
    text = public_text(info.value)
    assert "LLM_API_KEY" in text and "sk-test" not in text


async def test_unreachable_endpoint(tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    from pathlib import Path

    from bot.llm import client as llm_client
    from tests.conftest import make_settings

    monkeypatch.setattr(llm_client, "MAX_RETRIES", 1)
    settings = make_settings(Path(str(tmp_path)), None)
    llm = client(settings)
    with pytest.raises(ProviderError) as info:
        await llm.stream([{"role": "user", "content": "hi"}])
    await llm.close()
    assert "not answering (connection failed)" in public_text(info.value)


async def test_usage_from_the_last_chunk_with_details(
    settings: Settings, fake_llm: FakeOpenAI
) -> None:
    details = {
        "prompt_tokens": 120,
        "completion_tokens": 30,
        "total_tokens": 150,
        "prompt_tokens_details": {"cached_tokens": 100},
        "completion_tokens_details": {"reasoning_tokens": 12},
    }
    fake_llm.add(Text("hi", usage=details), Text("hello", usage=details))
    llm = client(settings)
    out = await llm.stream([{"role": "user", "content": "hi"}], model="other-model")
    plain = await llm.complete([{"role": "user", "content": "hi"}])
    await llm.close()
    assert fake_llm.requests[0]["stream_options"] == {"include_usage": True}
    assert fake_llm.requests[0]["model"] == "other-model" and out.model == "other-model"
    assert out.usage is not None and plain.usage is not None
    assert (out.usage.prompt_tokens, out.usage.cached_tokens, out.usage.reasoning_tokens) == (
        120,
        100,
        12,
    )
    assert plain.usage == out.usage and not out.usage.estimated
    assert out.provider_id and out.provider_id.startswith("chatcmpl-")


async def test_server_without_usage_or_stream_options(
    settings: Settings, fake_llm: FakeOpenAI
) -> None:
    fake_llm.send_usage = False
    llm = client(settings)
    out = await llm.stream([{"role": "user", "content": "hi"}])
    assert out.usage is None and out.content == "echo: hi"
    fake_llm.reject_stream_options = True
    out = await llm.stream([{"role": "user", "content": "again"}])
    assert out.content == "echo: again" and not llm.ask_usage
    await llm.stream([{"role": "user", "content": "third"}])  # no failed try any more
    await llm.close()
    # The rejected try is the only one repeated.
    assert ["stream_options" in r for r in fake_llm.requests] == [True, True, False, False]


def test_the_backoff_stays_at_its_ceiling_after_thousands_of_failures(settings: Settings) -> None:
    # make test-real: llama-server refused one request 1,025 times in a row while the chat
    # waited the "outage" out, and the doubling overflowed (OverflowError: 2.0 ** 1025).
    c = LLMClient(settings, retry_base_delay=0.5, retry_max_delay=8.0)
    quick = c.max_retries + 1
    for failures in (quick, quick + 100, quick + 5000):
        assert 0 < c._backoff(failures, quick, None) <= 8.0 * 1.25
