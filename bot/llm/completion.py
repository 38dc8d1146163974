"""What one model call gives back, and a stream's chunks added up into it, whatever dialect
of the OpenAI stream the server speaks (tests/test_llm_dialects.py replays each):

- tool calls in pieces keyed by `index` (OpenAI, Azure, vLLM, LM Studio, llama.cpp, Groq);
  whole in one chunk (Ollama, Mistral), without `index` (Gemini): each named entry is a
  call, and a second call under an index already taken brings an id of its own;
- the name repeated whole in every delta with the same id (llama-cpp-python): kept once; its
  legacy `function_call` beside `tool_calls` is ignored, and read only when it comes alone;
- reasoning as `reasoning_content` (DeepSeek, vLLM) or `reasoning` (OpenRouter, Ollama):
  never the answer, kept to go back with a tool-call turn (DeepSeek refuses the next request
  without it);
- usage in a last chunk without choices, in `x_groq.usage` (Groq), or none at all
  (llama-cpp-python); cached input as `prompt_tokens_details.cached_tokens`,
  `prompt_cache_hit_tokens` (DeepSeek) or llama.cpp's `timings.cache_n`.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

OnText = Callable[[str], Awaitable[None]]

CUT_NOTE = "\n\n(The reply was cut at the output limit, LLM_MAX_OUTPUT_TOKENS.)"


@dataclass
class LLMToolCall:
    id: str
    name: str
    arguments: str  # raw JSON text, as the model wrote it


@dataclass
class Usage:
    """Token counts of one call, as the provider reported them (or estimated by us)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0  # of prompt_tokens, read from the provider's cache
    reasoning_tokens: int = 0
    estimated: bool = False


def _num(d: object, key: str) -> int:
    value = d.get(key) if isinstance(d, dict) else None
    return value if isinstance(value, int) and value >= 0 else 0


def parse_usage(raw: object, timings: object = None) -> Usage | None:
    """The `usage` object (and llama.cpp's `timings` beside it)."""
    if not isinstance(raw, dict):
        return None
    cached = _num(raw.get("prompt_tokens_details"), "cached_tokens")
    cached = cached or _num(raw, "prompt_cache_hit_tokens") or _num(timings, "cache_n")
    return Usage(
        prompt_tokens=_num(raw, "prompt_tokens"),
        completion_tokens=_num(raw, "completion_tokens"),
        cached_tokens=cached,
        reasoning_tokens=_num(raw.get("completion_tokens_details"), "reasoning_tokens"),
    )


@dataclass
class Completion:
    content: str = ""
    tool_calls: list[LLMToolCall] = field(default_factory=list)
    finish_reason: str | None = None
    usage: Usage | None = None  # None: the provider sent none
    model: str = ""  # the model that answered (the fallback's name when it did)
    provider_id: str | None = None  # the provider's completion id
    # Set when the fallback model answered: why the requested model did not.
    fallback_from: str | None = None
    fallback_reason: str | None = None
    reasoning: str = ""  # the model's thinking, never shown as the answer
    reasoning_field: str = ""  # the wire name it came under, to send it back under
    # How many of tool_calls the model wrote out as text (bot/llm/written.py), not sent.
    written: int = 0

    @property
    def truncated(self) -> bool:
        """The reply stopped at the output limit (max_tokens), not where the model ended it
        (Mistral says `model_length` when the context ran out first)."""
        return self.finish_reason in ("length", "model_length")

    @property
    def cut_note(self) -> str:
        """The line that tells the user the reply was cut; empty when it was not."""
        return CUT_NOTE if self.truncated else ""

    def turn_fields(self) -> dict[str, str]:
        """What the assistant turn carrying this completion's tool calls sends back besides
        content and tool_calls: the reasoning, under the provider's own name."""
        return {self.reasoning_field: self.reasoning} if self.reasoning_field else {}


def from_json(raw: object, model: str) -> Completion | None:
    """A non-streamed chat completion's JSON: the first choice's text, usage and id."""
    if not isinstance(raw, dict):
        return None
    choices = raw.get("choices")
    first = choices[0] if isinstance(choices, list) and choices else None
    first = first if isinstance(first, dict) else {}
    message = first.get("message")
    message = message if isinstance(message, dict) else {}
    out = Completion(model=model, usage=parse_usage(raw.get("usage"), raw.get("timings")))
    _reasoning(out, message)
    content, provider_id, finish = message.get("content"), raw.get("id"), first.get("finish_reason")
    out.content = content if isinstance(content, str) else ""
    out.provider_id = provider_id if isinstance(provider_id, str) else None
    out.finish_reason = finish if isinstance(finish, str) else None
    return out


def _reasoning(out: Completion, delta: dict[str, Any]) -> None:
    for name in ("reasoning_content", "reasoning"):
        piece = delta.get(name)
        if isinstance(piece, str) and piece:
            out.reasoning += piece
            out.reasoning_field = name
            return


class _Calls:
    """Tool-call deltas put together, one LLMToolCall per call whatever the dialect."""

    def __init__(self) -> None:
        self.calls: list[LLMToolCall] = []
        self.by_index: dict[int, LLMToolCall] = {}

    def add(self, tc: dict[str, Any]) -> None:
        raw_id = tc.get("id")
        cid = raw_id if isinstance(raw_id, str) else ""
        index = tc.get("index")
        call: LLMToolCall | None
        if isinstance(index, int):
            call = self.by_index.get(index)
            if call is not None and cid and call.id and cid != call.id:
                call = None  # another call under the same index (Ollama's parallel calls)
        elif isinstance((tc.get("function") or {}).get("name"), str):
            call = None  # no index (Gemini): each named entry is a whole call
        else:
            call = self.calls[-1] if self.calls else None
        if call is None:
            call = LLMToolCall(id="", name="", arguments="")
            self.calls.append(call)
            if isinstance(index, int):
                self.by_index[index] = call
        call.id = call.id or cid
        fn = tc.get("function")
        fn = fn if isinstance(fn, dict) else {}
        name, arguments = fn.get("name"), fn.get("arguments")
        if isinstance(name, str) and name:
            # Names come whole; a delta that names the call again (with its id, or the same
            # name) repeats it rather than continuing it.
            repeated = bool(call.name) and (bool(cid) or name == call.name)
            call.name = name if repeated else call.name + name
        if isinstance(arguments, str):
            call.arguments += arguments

    def done(self) -> list[LLMToolCall]:
        """The calls, each with an id of its own (some servers send none, or one twice)."""
        seen: set[str] = set()
        for n, call in enumerate(self.calls):
            if not call.id or call.id in seen:
                call.id = f"{call.id or 'call'}_{n}"
            seen.add(call.id)
        return self.calls


async def collect(
    events: AsyncGenerator[dict[str, Any]], model: str, on_text: OnText | None
) -> Completion:
    """A stream's parsed JSON events added up into one Completion; `on_text` gets the whole
    answer so far after each piece of it."""
    out = Completion(model=model)
    calls = _Calls()
    text: list[str] = []
    async with contextlib.aclosing(events):
        async for chunk in events:
            groq = chunk.get("x_groq")
            raw_usage = chunk.get("usage") or (groq.get("usage") if isinstance(groq, dict) else 0)
            if raw_usage:
                out.usage = parse_usage(raw_usage, chunk.get("timings"))
            if out.provider_id is None and isinstance(chunk.get("id"), str):
                out.provider_id = chunk["id"]
            choices = chunk.get("choices")
            if not choices or not isinstance(choices[0], dict):
                continue
            choice = choices[0]
            delta = choice.get("delta")
            delta = delta if isinstance(delta, dict) else {}
            _reasoning(out, delta)
            content = delta.get("content")
            if isinstance(content, str) and content:
                text.append(content)
                if on_text is not None:
                    await on_text("".join(text))
            pieces = delta.get("tool_calls")
            if not pieces and isinstance(delta.get("function_call"), dict):
                pieces = [{"index": 0, "function": delta["function_call"]}]
            for tc in pieces if isinstance(pieces, list) else ():
                if isinstance(tc, dict):
                    calls.add(tc)
            if choice.get("finish_reason"):
                out.finish_reason = choice["finish_reason"]
    out.content = "".join(text)
    out.tool_calls = calls.done()
    return out
