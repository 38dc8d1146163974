"""One stream per provider dialect (tests/fixtures/llm/dialects/, each written after that
provider's documented stream; README.md names the pages), replayed over HTTP to the real
client: the answer, the tool calls, the reasoning and the usage come out the same."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from bot.agent.runner import Incoming
from bot.app import build_app
from bot.errors import ProviderError, public_text
from bot.llm.client import LLMClient
from bot.llm.completion import parse_usage
from tests.conftest import make_settings
from tests.llm_replay import Replay, client, replaying


@pytest.fixture
async def replay() -> AsyncIterator[Replay]:
    async with replaying() as server:
        yield server


TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}]


@dataclass
class Expect:
    content: str = ""
    calls: list[tuple[str, str, dict[str, object]]] = field(default_factory=list)  # id, name, args
    reasoning: str = ""
    reasoning_field: str = ""
    finish: str | None = "stop"
    usage: tuple[int, int, int] | None = None  # prompt, completion, cached


DIALECTS = {
    "openai": Expect(
        calls=[("call_DdmO9pD3xa9XTPNJ32zg2hcA", "get_weather", {"location": "Paris, France"})],
        finish="tool_calls",
        usage=(2006, 17, 1920),
    ),
    "openai-legacy-function-call": Expect(
        calls=[("call_0", "get_weather", {"location": "Paris"})], finish="function_call"
    ),
    "azure": Expect(content="Hello! How can I help?", usage=(12, 8, 0)),
    "openrouter": Expect(
        content="2 + 2 = 4.",
        reasoning="The user asks for 2+2.",
        reasoning_field="reasoning",
        usage=(14, 20, 0),
    ),
    "ollama": Expect(
        calls=[
            ("call_hk81qg8b", "get_weather", {"city": "Toronto"}),
            ("call_x7c2mw1p", "get_weather", {"city": "Paris"}),
        ],
        finish="tool_calls",
        usage=(170, 40, 0),
    ),
    "vllm": Expect(
        calls=[("chatcmpl-tool-5a1f", "get_weather", {"city": "Berlin"})],
        reasoning="I should call the tool.",
        reasoning_field="reasoning_content",
        finish="tool_calls",
        usage=(300, 40, 0),
    ),
    "lmstudio": Expect(
        calls=[("365174485", "open_safe_url", {"url": "https://example.com"})], finish="tool_calls"
    ),
    "deepseek": Expect(
        content="9.8 is greater.",
        reasoning="Compare 9.11 and 9.8 digit by digit.",
        reasoning_field="reasoning_content",
        usage=(1200, 30, 1024),
    ),
    "deepseek-cache": Expect(content="Hello!", usage=(900, 3, 640)),
    "groq": Expect(content="Fast inference matters.", usage=(40, 3, 0)),
    "mistral": Expect(
        calls=[("D681PevKs", "retrieve_payment_status", {"transaction_id": "T1001"})],
        finish="tool_calls",
        usage=(167, 23, 0),
    ),
    "gemini": Expect(
        calls=[
            ("function-call-1", "get_weather", {"location": "Boston, MA"}),
            ("function-call-2", "get_weather", {"location": "Chicago, IL"}),
        ],
        finish="tool_calls",
        usage=(60, 16, 0),
    ),
}


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
async def test_dialect(dialect: str, tmp_path: Path, replay: Replay) -> None:
    want = DIALECTS[dialect]
    replay.queue.append(f"dialects/{dialect}.txt")
    seen: list[str] = []

    async def on_text(text: str) -> None:
        seen.append(text)

    llm = client(tmp_path, replay)
    out = await llm.stream([{"role": "user", "content": "hi"}], TOOLS, on_text)
    await llm.close()
    assert out.content == want.content
    assert (seen[-1] if seen else "") == want.content  # the reasoning never reaches the user
    got = [(c.id, c.name, json.loads(c.arguments)) for c in out.tool_calls]
    assert got == want.calls
    assert out.finish_reason == want.finish
    usage = out.usage
    counts = (usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens) if usage else None
    assert counts == want.usage
    assert (out.reasoning, out.reasoning_field) == (want.reasoning, want.reasoning_field)


async def test_the_reasoning_goes_back_with_the_tool_call_turn(
    tmp_path: Path,
    replay: Replay,
) -> None:
    """DeepSeek refuses a follow-up without the reasoning of a tool-call turn: the turn the
    agent sends back carries it under the provider's own field name."""
    replay.queue.append("dialects/vllm.txt")
    llm = client(tmp_path, replay)
    out = await llm.stream([{"role": "user", "content": "hi"}], TOOLS)
    await llm.close()
    assert out.turn_fields() == {"reasoning_content": "I should call the tool."}
    replay.queue.append("dialects/groq.txt")
    llm = client(tmp_path, replay)
    plain = await llm.stream([{"role": "user", "content": "hi"}])
    await llm.close()
    assert plain.turn_fields() == {}


async def test_a_provider_error_inside_a_200_stream(tmp_path: Path, replay: Replay) -> None:
    """OpenRouter: an error after the stream began comes as a chunk with `error`; the user
    gets one plain line, the fallback model (when set) gets the request."""
    replay.queue.append("dialects/openrouter-error.txt")
    llm = client(tmp_path, replay)
    with pytest.raises(ProviderError) as info:
        await llm.stream([{"role": "user", "content": "hi"}])
    await llm.close()
    assert len(replay.requests) == 1
    assert "error in the stream" in public_text(info.value)

    replay.queue += ["dialects/openrouter-error.txt", "dialects/groq.txt"]
    llm = client(tmp_path, replay, llm_fallback_model="backup")
    out = await llm.stream([{"role": "user", "content": "hi"}])
    await llm.close()
    assert out.content == "Fast inference matters." and out.fallback_from == "fake-model"


@pytest.mark.db
async def test_the_agent_sends_the_reasoning_back_with_its_tool_call_turn(
    tmp_path: Path, replay: Replay
) -> None:
    replay.queue += ["dialects/vllm.txt", "dialects/groq.txt"]
    settings = make_settings(tmp_path, replay)  # type: ignore[arg-type]
    app = await build_app(settings, llm=LLMClient(settings, retry_base_delay=0.01))
    try:
        reply = await app.agent.handle(Incoming("weather in Berlin?", telegram_user_id=42))
    finally:
        await app.close()
    assert reply.text.startswith("Fast inference matters.")
    turn = next(m for m in replay.requests[1]["messages"] if m.get("tool_calls"))
    assert turn["reasoning_content"] == "I should call the tool."
    assert all("reasoning" not in m for m in replay.requests[1]["messages"])


def test_cached_input_from_llama_cpp_timings_alone() -> None:
    """Older llama.cpp builds send no prompt_tokens_details: `timings.cache_n` says it."""
    usage = parse_usage({"prompt_tokens": 2126, "completion_tokens": 8}, {"cache_n": 5})
    assert usage is not None and (usage.prompt_tokens, usage.cached_tokens) == (2126, 5)
