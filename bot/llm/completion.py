"""What one model call gives back, read from whatever the server and the model send.

The server's dialect of the OpenAI stream (tests/test_llm_dialects.py replays each):

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

What the model wrote out as text instead of sending it as tool calls is read by
bot/llm/written.py.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator
from typing import Any

from tools.chat import Completion, LLMToolCall, OnText, Usage


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
            if "reasoning_content" in delta or "reasoning" in delta:
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
