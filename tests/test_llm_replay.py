"""Real servers' recorded answers (tests/fixtures/llm/README.md), replayed byte for byte over
HTTP to the real client: what llama.cpp and llama-cpp-python send, not what our fakes send."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.errors import ProviderError, public_text
from tests.llm_replay import Replay, client, replaying


@pytest.fixture
async def replay() -> AsyncIterator[Replay]:
    async with replaying() as server:
        yield server


TOOLS = [{"type": "function", "function": {"name": "schedule", "parameters": {}}}]


async def test_llama_cpp_python_repeats_the_name_in_every_delta(
    tmp_path: Path, replay: Replay
) -> None:
    """llama-cpp-python 0.2.62 sends function.name (and the legacy function_call) whole in
    each of a call's deltas, with the same id: the name is that name, once."""
    replay.queue.append("llama-cpp-python-0010-resp.txt")
    llm = client(tmp_path, replay)
    out = await llm.stream([{"role": "user", "content": "remind me"}], TOOLS)
    await llm.close()
    assert [c.name for c in out.tool_calls] == ["schedule"]
    call = out.tool_calls[0]
    assert call.id == "call__0_schedule_cmpl-a65e6dd7-d339-4faa-8aaf-952e9b8714bf"
    assert isinstance(json.loads(call.arguments), dict)  # the pieces, each once
    assert out.finish_reason == "tool_calls" and out.usage is None  # it sends no usage


async def test_llama_server_keep_alives_usage_and_cache(tmp_path: Path, replay: Replay) -> None:
    """llama-server: `:` comment lines while it reads the prompt, then the answer, then a
    usage chunk with no choices and its own `timings`."""
    replay.queue.append("llama-server-0004-resp.txt")
    seen: list[str] = []

    async def on_text(text: str) -> None:
        seen.append(text)

    llm = client(tmp_path, replay)
    out = await llm.stream([{"role": "user", "content": "capital of France?"}], None, on_text)
    await llm.close()
    assert out.content.endswith("Paris.") and seen[-1] == out.content
    assert out.finish_reason == "stop" and not out.truncated
    assert out.usage is not None
    assert (out.usage.prompt_tokens, out.usage.completion_tokens) == (2126, 8)
    assert out.usage.cached_tokens == 5


async def test_a_reply_cut_at_the_output_limit_says_so(tmp_path: Path, replay: Replay) -> None:
    replay.queue.append("llama-server-0020-resp.txt")
    llm = client(tmp_path, replay)
    out = await llm.complete([{"role": "user", "content": "sum up"}], 600)
    await llm.close()
    assert out.finish_reason == "length" and out.truncated
    assert "LLM_MAX_OUTPUT_TOKENS" in out.cut_note
    assert out.usage is not None and out.usage.cached_tokens == 1499
    assert replay.requests[0]["max_tokens"] == 600


async def test_context_overflow_is_logged_and_told_in_one_sentence(
    tmp_path: Path, replay: Replay, caplog: pytest.LogCaptureFixture
) -> None:
    replay.queue.append("llama-server-0021-resp.txt")
    llm = client(tmp_path, replay)
    with caplog.at_level(logging.WARNING), pytest.raises(ProviderError) as info:
        await llm.stream([{"role": "user", "content": "hi"}])
    await llm.close()
    assert len(replay.requests) == 1  # a refusal for length is not retried
    text = public_text(info.value)
    assert "/newsession" in text and "LLM_CONTEXT_TOKENS" in text and text.count(".") == 1
    logged = [
        r.getMessage() for r in caplog.records if "exceeds the available context" in r.getMessage()
    ]
    assert len(logged) == 1 and "2290 tokens" in logged[0]
