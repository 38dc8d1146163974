"""Streaming chat completions with tool calls, with bounded retries and a fallback model.

Retries cover 429, 5xx, timeouts and connection errors; after the last one the fallback
model (LLM_FALLBACK_MODEL) gets the request, and when there is none, or it fails too, a
ProviderError carries the status so the user gets one plain sentence. Every completion
carries the provider's token usage when it sent one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from bot.config import Settings
from bot.errors import ProviderError
from bot.llm.stream import open_stream
from bot.llm.wire import (
    APIConnectionError,
    APIError,
    APIStatusError,
    APITimeoutError,
    Endpoint,
    ResponseDataError,
    StreamDataError,
    StreamErrorEvent,
)

log = logging.getLogger(__name__)

OnText = Callable[[str], Awaitable[None]]


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
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    estimated: bool = False


def parse_usage(raw: object) -> Usage | None:
    """The OpenAI `usage` object (cached and reasoning details when present)."""
    if not isinstance(raw, dict):
        return None

    def num(d: object, key: str) -> int:
        value = d.get(key) if isinstance(d, dict) else None
        return value if isinstance(value, int) and value >= 0 else 0

    return Usage(
        prompt_tokens=num(raw, "prompt_tokens"),
        completion_tokens=num(raw, "completion_tokens"),
        cached_tokens=num(raw.get("prompt_tokens_details"), "cached_tokens"),
        reasoning_tokens=num(raw.get("completion_tokens_details"), "reasoning_tokens"),
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


class ChatModel(Protocol):
    """What the agent (and the vision gate around it) asks of a chat model: one streamed
    completion. LLMClient is the real one; tests use a scripted in-process model."""

    async def stream(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        on_text: OnText | None = None,
        *,
        model: str | None = None,
    ) -> Completion: ...


def _retryable(exc: Exception) -> tuple[bool, int | None, float | None]:
    """(retry?, HTTP status, server-suggested delay in seconds)."""
    if isinstance(exc, APIStatusError):
        status = exc.status_code
        retry_after: float | None = None
        header = exc.headers.get("retry-after")
        if header:
            try:
                retry_after = float(header)
            except ValueError:
                retry_after = None
        return status == 429 or status >= 500, status, retry_after
    # A malformed stream is a broken connection or proxy as far as a retry is concerned.
    if isinstance(exc, APIConnectionError | StreamDataError):
        return True, None, None
    return False, None, None


class LLMClient:
    """Chat completions against an OpenAI-compatible endpoint, over httpx (bot/llm/wire.py).

    The streamed chat (every message's hot path) goes through bot/llm/stream.py; plain
    completions and the model list are one JSON request each. Our messages are already
    wire-format dicts, so nothing is converted on the way out.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        http_client: Any = None,
        retry_base_delay: float = 0.5,
        retry_max_delay: float = 8.0,
    ) -> None:
        key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else "none"
        self.model = settings.llm_model
        self.max_retries = settings.llm_max_retries
        self.retry_base_delay = retry_base_delay
        self.retry_max_delay = retry_max_delay
        self.client = Endpoint(
            settings.llm_base_url, key, settings.llm_timeout_s, http_client=http_client
        )
        self.ask_usage = True  # stream_options.include_usage, until a server rejects it
        self.fallback_model = settings.llm_fallback_model
        self.fallback_client = self.client
        other_url = settings.llm_fallback_base_url
        if self.fallback_model and (other_url or settings.llm_fallback_api_key):
            fb_key = settings.llm_fallback_api_key
            self.fallback_client = Endpoint(
                other_url or settings.llm_base_url,
                fb_key.get_secret_value() if fb_key else key,
                settings.llm_timeout_s,
                http_client=http_client,
            )

    async def close(self) -> None:
        await self.client.aclose()
        if self.fallback_client is not self.client:
            await self.fallback_client.aclose()

    async def _with_fallback(
        self, model: str | None, what: Callable[[Endpoint, str], Awaitable[Completion]]
    ) -> Completion:
        """The requested model with its retries; then, when it is still failing (not when
        it refused the request), the fallback model with the same retries."""
        primary = model or self.model
        try:
            return await self._with_retries(lambda: what(self.client, primary))
        except ProviderError as exc:
            transient = exc.status is None or exc.status == 429 or exc.status >= 500
            fallback = self.fallback_model
            if not transient or not fallback or fallback == primary:
                raise
            log.warning("model %s failed (%s); trying the fallback %s", primary, exc, fallback)
            out = await self._with_retries(lambda: what(self.fallback_client, fallback))
            out.fallback_from, out.fallback_reason = primary, str(exc)
            return out

    async def _with_retries(self, what: Callable[[], Awaitable[Completion]]) -> Completion:
        attempt = 0
        while True:
            try:
                return await what()
            except APIError as exc:
                retry, status, after = _retryable(exc)
                if isinstance(exc, APIStatusError) and not retry:
                    raise ProviderError(_describe(exc), status) from exc
                if not retry or attempt >= self.max_retries:
                    what_failed = f"HTTP {status}" if status else _kind(exc)
                    log.warning(
                        "model provider failed after %d tries: %s", attempt + 1, what_failed
                    )
                    raise ProviderError(what_failed, status) from exc
                delay = min(self.retry_max_delay, self.retry_base_delay * 2**attempt)
                delay = min(after, 30.0) if after else delay * (0.75 + random.random() / 2)
                attempt += 1
                log.info(
                    "model provider %s; retry %d in %.2fs",
                    status or type(exc).__name__,
                    attempt,
                    delay,
                )
                await asyncio.sleep(delay)

    async def stream(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        on_text: OnText | None = None,
        *,
        model: str | None = None,
    ) -> Completion:
        """One streamed completion (`model`: default LLM_MODEL); `on_text` gets the whole
        text so far after each delta."""

        async def once(client: Endpoint, model: str) -> Completion:
            body: dict[str, Any] = {"model": model, "messages": messages, "stream": True}
            if tools:
                body["tools"] = tools
            if self.ask_usage:
                # The provider's own token counts arrive in a last chunk without choices.
                body["stream_options"] = {"include_usage": True}
            try:
                events = await open_stream(client, body)
            except APIStatusError as exc:
                # An older server that rejects stream_options: go on without (usage is
                # then estimated), and stop asking.
                rejected = exc.status_code == 400 and "stream_options" in str(exc)
                if not rejected or "stream_options" not in body:
                    raise
                log.warning("the model endpoint rejects stream_options; usage will be estimated")
                self.ask_usage = False
                body.pop("stream_options")
                events = await open_stream(client, body)
            return await _collect(events, model, on_text)

        return await self._with_fallback(model, once)

    async def complete(
        self,
        messages: list[dict[str, Any]],
        max_tokens: int | None = None,
        *,
        model: str | None = None,
    ) -> Completion:
        """A plain, non-streamed completion (summaries, code generation), with its usage."""

        async def once(client: Endpoint, model: str) -> Completion:
            body: dict[str, Any] = {"model": model, "messages": messages}
            if max_tokens:
                body["max_tokens"] = max_tokens
            return _completion(await client.call("POST", "/chat/completions", body), model)

        return await self._with_fallback(model, once)

    async def complete_text(
        self, messages: list[dict[str, Any]], max_tokens: int | None = None, **_: Any
    ) -> str:
        """The text of `complete` (unmetered: the app wraps this client in a Meter)."""
        return (await self.complete(messages, max_tokens)).content

    async def list_models(self) -> list[str]:
        page = await self.client.call("GET", "/models")
        data = page.get("data") if isinstance(page, dict) else None
        if not isinstance(data, list):
            raise ResponseDataError("not a model list")
        return [m["id"] for m in data if isinstance(m, dict) and isinstance(m.get("id"), str)]


def _completion(raw: object, model: str) -> Completion:
    """A non-streamed chat completion's JSON: the first choice's text, usage and id."""
    if not isinstance(raw, dict):
        raise ResponseDataError("not a chat completion")
    choices = raw.get("choices")
    first = choices[0] if isinstance(choices, list) and choices else None
    message = first.get("message") if isinstance(first, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    provider_id = raw.get("id")
    return Completion(
        content=content if isinstance(content, str) else "",
        usage=parse_usage(raw.get("usage")),
        model=model,
        provider_id=provider_id if isinstance(provider_id, str) else None,
    )


def _kind(exc: Exception) -> str:
    if isinstance(exc, APITimeoutError):
        return "timed out"
    if isinstance(exc, APIConnectionError):
        return "connection failed"
    if isinstance(exc, StreamDataError):
        return "malformed stream"
    if isinstance(exc, ResponseDataError):
        return "malformed answer"
    if isinstance(exc, StreamErrorEvent):
        return "error in the stream"  # the provider's own words go to no user
    return type(exc).__name__


def _describe(exc: APIStatusError) -> str:
    return f"HTTP {exc.status_code}: {exc.error_message or exc.message}"[:300]


async def _collect(
    events: AsyncGenerator[dict[str, Any]], model: str, on_text: OnText | None
) -> Completion:
    """A stream's events (parsed JSON dicts, not the SDK's chunk objects, which cost more
    CPU than the rest) added up into one Completion."""
    out = Completion(model=model)
    calls: dict[int, LLMToolCall] = {}
    text: list[str] = []
    async with contextlib.aclosing(events):
        async for chunk in events:
            if usage := chunk.get("usage"):
                out.usage = parse_usage(usage)
            if out.provider_id is None and isinstance(chunk.get("id"), str):
                out.provider_id = chunk["id"]
            choices = chunk.get("choices")
            if not choices or not isinstance(choices[0], dict):
                continue
            choice = choices[0]
            delta = choice.get("delta")
            delta = delta if isinstance(delta, dict) else {}
            if content := delta.get("content"):
                text.append(content)
                if on_text is not None:
                    await on_text("".join(text))
            for tc in delta.get("tool_calls") or []:
                if isinstance(tc, dict):
                    _add_call_delta(calls, tc)
            if choice.get("finish_reason"):
                out.finish_reason = choice["finish_reason"]
    out.content = "".join(text)
    out.tool_calls = [calls[i] for i in sorted(calls)]
    for n, call in enumerate(out.tool_calls):
        call.id = call.id or f"call_{n}"
    return out


def _add_call_delta(calls: dict[int, LLMToolCall], tc: dict[str, Any]) -> None:
    """Tool calls arrive in pieces keyed by index: the id once, name and arguments in parts."""
    call = calls.setdefault(tc.get("index", 0), LLMToolCall(id="", name="", arguments=""))
    if tc.get("id"):
        call.id = tc["id"]
    fn = tc.get("function")
    if isinstance(fn, dict):
        call.name += fn.get("name") or ""
        call.arguments += fn.get("arguments") or ""
