"""Streaming chat completions with tool calls, with bounded retries and a fallback model.

Retries cover 429, 5xx, timeouts and connection errors; after the last one the fallback
model (LLM_FALLBACK_MODEL) gets the request, and when there is none, or it fails too, a
ProviderError carries the status so the user gets one plain sentence. Every completion
carries the provider's token usage when it sent one.
"""

from __future__ import annotations

import asyncio
import logging
import random
import re
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from bot.config import Settings
from bot.errors import ProviderError
from bot.llm.completion import Completion, LLMToolCall, OnText, Usage, collect, from_json
from bot.llm.context import ContextSize
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
from tools.model_call import ModelCall

__all__ = ["Completion", "LLMClient", "LLMToolCall", "OnText", "Usage"]

log = logging.getLogger(__name__)
# Retries of one call on 429, 5xx, timeouts and connection errors, with backoff (0.5 s
# doubling to 8 s): about 15 s of a provider's hiccup is ridden out before the fallback
# model (or one sentence to the user) takes over.
MAX_RETRIES = 4
T = TypeVar("T")

# How providers say the prompt does not fit (OpenAI's and Groq's context_length_exceeded,
# llama.cpp, vLLM, DeepSeek, Mistral, Gemini, LM Studio, Anthropic behind a router).
_OVERFLOW = re.compile(
    r"context[_ ](length|size|window)|maximum context|exceeds? the (available|maximum)"
    r"|input token count|prompt is too long|too large for model|reduce the length of the messages",
    re.I,
)


class ContextOverflow(ProviderError):
    """The provider refused the request as longer than the model's context."""

    advice = (
        "This conversation no longer fits the model's context: start a fresh one with "
        "/newsession, or ask the admin to set LLM_CONTEXT_TOKENS (or lower LLM_MAX_OUTPUT_TOKENS)."
    )


class DeadlinePassed(ProviderError):
    """The whole call (its retries included) took longer than LLM_TIMEOUT_S."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"no complete answer within {seconds:g} s", None)
        self.advice = (
            f"The model did not finish its answer within LLM_TIMEOUT_S ({seconds:g} s): "
            "try again, or ask the admin to raise LLM_TIMEOUT_S."
        )


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
    """Chat completions against an OpenAI-compatible endpoint, over httpx (bot/llm/wire.py):
    the ChatModel (bot/llm/model.py) that every wrapper ends at.

    The streamed chat goes through bot/llm/stream.py; plain completions and the model list
    are one JSON request each. Every call asks for at most LLM_MAX_OUTPUT_TOKENS and, its
    retries included, ends within LLM_TIMEOUT_S. Nothing is metered here (MeteredModel does).
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
        self.max_retries = MAX_RETRIES
        self.deadline = settings.llm_timeout_s
        self.max_output_tokens = settings.llm_max_output_tokens
        self.retry_base_delay = retry_base_delay
        self.retry_max_delay = retry_max_delay
        self.client = Endpoint(
            settings.llm_base_url, key, settings.llm_timeout_s, http_client=http_client
        )
        self.context = ContextSize(self.client, settings.llm_context_tokens)
        self.ask_usage = True  # stream_options.include_usage, until a server rejects it
        self.limit_field = "max_tokens"  # max_completion_tokens where a server asks for it
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

    async def context_tokens(self, model: str | None = None) -> int | None:
        """The model's context in tokens: LLM_CONTEXT_TOKENS, else what the server says
        (llama.cpp, Ollama), else None (unknown)."""
        return await self.context.tokens(model or self.model)

    async def _with_fallback(
        self, model: str | None, what: Callable[[Endpoint, str], Awaitable[Completion]]
    ) -> Completion:
        """The requested model with its retries; then, when it is still failing (not when
        it refused the request), the fallback model with the same retries. Each model's
        share ends at the deadline, keep-alive comments or not."""

        async def bounded(client: Endpoint, name: str) -> Completion:
            try:
                async with asyncio.timeout(self.deadline):
                    return await self._with_retries(lambda: what(client, name))
            except TimeoutError:
                log.warning("model %s gave no complete answer within %gs", name, self.deadline)
                raise DeadlinePassed(self.deadline) from None

        primary = model or self.model
        try:
            return await bounded(self.client, primary)
        except ProviderError as exc:
            transient = exc.status is None or exc.status == 429 or exc.status >= 500
            fallback = self.fallback_model
            if isinstance(exc, ContextOverflow) or not transient or not fallback:
                raise
            if fallback == primary:
                raise
            log.warning("model %s failed (%s); trying the fallback %s", primary, exc, fallback)
            out = await bounded(self.fallback_client, fallback)
            out.fallback_from, out.fallback_reason = primary, str(exc)
            return out

    async def _with_retries(self, what: Callable[[], Awaitable[Completion]]) -> Completion:
        attempt = 0
        while True:
            try:
                return await what()
            except APIError as exc:
                said = f"{exc.message} {exc.body}"
                if isinstance(exc, APIStatusError | StreamErrorEvent) and _OVERFLOW.search(said):
                    status = exc.status_code if isinstance(exc, APIStatusError) else None
                    raise ContextOverflow(_kind(exc), status) from exc
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

    async def _adapting(self, body: dict[str, Any], send: Callable[[], Awaitable[T]]) -> T:
        """`send()`, once more after each refused field `_adapted` took out of `body`."""
        while True:
            try:
                return await send()
            except APIStatusError as exc:
                if not self._adapted(exc, body):
                    raise

    def _adapted(self, exc: APIStatusError, body: dict[str, Any]) -> bool:
        """Whether a 400 was a server refusing one of our optional fields, now changed in
        `body` (and for later calls): stream_options (older servers; usage is then
        estimated), max_tokens (OpenAI's reasoning models want max_completion_tokens)."""
        said = str(exc)
        if exc.status_code not in (400, 422):  # Mistral answers 422 to a field it does not take
            return False
        if "stream_options" in said and body.pop("stream_options", None) is not None:
            log.warning("the model endpoint rejects stream_options; usage will be estimated")
            self.ask_usage = False
            return True
        if "max_completion_tokens" in said and "max_tokens" in body:
            body["max_completion_tokens"] = body.pop("max_tokens")
            self.limit_field = "max_completion_tokens"
            return True
        return False

    def _body(
        self, model: str, messages: list[dict[str, Any]], limit: int | None
    ) -> dict[str, Any]:
        cap = self.max_output_tokens
        return {"model": model, "messages": messages, self.limit_field: min(limit or cap, cap)}

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
            body = self._body(model, messages, None)
            body["stream"] = True
            if tools:
                body["tools"] = tools
            if self.ask_usage:
                # The provider's own token counts arrive in a last chunk without choices.
                body["stream_options"] = {"include_usage": True}
            events = await self._adapting(body, lambda: open_stream(client, body))
            return await collect(events, model, on_text)

        return await self._with_fallback(model, once)

    async def complete(
        self,
        messages: list[dict[str, Any]],
        max_tokens: int | None = None,
        *,
        model: str | None = None,
        call: ModelCall | None = None,
    ) -> Completion:
        """A plain, non-streamed completion (summaries, code generation), with its usage;
        at most `max_tokens` (and never more than LLM_MAX_OUTPUT_TOKENS). `call` is for a
        metering wrapper: the client itself sends the same request for anyone."""

        async def once(client: Endpoint, model: str) -> Completion:
            body = self._body(model, messages, max_tokens)
            raw = await self._adapting(body, lambda: client.call("POST", "/chat/completions", body))
            out = from_json(raw, model)
            if out is None:
                raise ResponseDataError("not a chat completion")
            if out.truncated:  # a summary or program cut short: its caller gets what there is
                log.info(
                    "a %s-token completion was cut at its output limit", body.get(self.limit_field)
                )
            return out

        return await self._with_fallback(model, once)

    async def complete_text(
        self,
        messages: list[dict[str, Any]],
        max_tokens: int | None = None,
        *,
        call: ModelCall | None = None,
    ) -> str:
        """The text of `complete` (unmetered: the app wraps this client in MeteredModel)."""
        return (await self.complete(messages, max_tokens, call=call)).content

    async def list_models(self) -> list[str]:
        page = await self.client.call("GET", "/models")
        data = page.get("data") if isinstance(page, dict) else None
        if not isinstance(data, list):
            raise ResponseDataError("not a model list")
        return [m["id"] for m in data if isinstance(m, dict) and isinstance(m.get("id"), str)]


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
    if isinstance(exc, APIStatusError):
        return f"HTTP {exc.status_code}"
    return type(exc).__name__


def _describe(exc: APIStatusError) -> str:
    return f"HTTP {exc.status_code}: {exc.error_message or exc.message}"[:300]
