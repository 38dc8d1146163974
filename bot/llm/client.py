"""Streaming chat completions with tool calls, with bounded retries.

Retries cover 429, 5xx, timeouts and connection errors; after the last one a
ProviderError carries the status so the user gets one plain sentence.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import openai
from openai import AsyncOpenAI, AsyncStream
from openai.types.chat import ChatCompletion

from bot.config import Settings
from bot.errors import ProviderError

log = logging.getLogger(__name__)

OnText = Callable[[str], Awaitable[None]]


@dataclass
class LLMToolCall:
    id: str
    name: str
    arguments: str  # raw JSON text, as the model wrote it


@dataclass
class Completion:
    content: str = ""
    tool_calls: list[LLMToolCall] = field(default_factory=list)
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


def _retryable(exc: Exception) -> tuple[bool, int | None, float | None]:
    """(retry?, HTTP status, server-suggested delay in seconds)."""
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        retry_after: float | None = None
        header = exc.response.headers.get("retry-after") if exc.response is not None else None
        if header:
            try:
                retry_after = float(header)
            except ValueError:
                retry_after = None
        return status == 429 or status >= 500, status, retry_after
    if isinstance(exc, openai.APITimeoutError | openai.APIConnectionError):
        return True, None, None
    return False, None, None


class LLMClient:
    """Chat completions through the openai SDK's HTTP client.

    Requests go through `client.post` rather than `chat.completions.create`: our messages
    are already plain wire-format dicts, and the SDK's per-call TypedDict transform of
    them cost ~30 ms per request with a long history (measured with pyinstrument). The
    SDK still does the HTTP, the SSE parsing, the typed chunks and the errors.
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
        self.client = AsyncOpenAI(
            base_url=settings.llm_base_url,
            api_key=key,
            max_retries=0,  # ours, below: the SDK's would hide the status from the user text
            timeout=settings.llm_timeout_s,
            http_client=http_client,
        )

    async def close(self) -> None:
        await self.client.close()

    async def _with_retries(self, what: Callable[[], Awaitable[Completion]]) -> Completion:
        attempt = 0
        while True:
            try:
                return await what()
            except openai.APIError as exc:
                retry, status, after = _retryable(exc)
                if isinstance(exc, openai.APIStatusError) and not retry:
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
    ) -> Completion:
        """One streamed completion; `on_text` gets the whole text so far after each delta."""

        async def once() -> Completion:
            kwargs: dict[str, Any] = {"model": self.model, "messages": messages, "stream": True}
            if tools:
                kwargs["tools"] = tools
            # Chunks come as the parsed JSON dicts (AsyncStream[object]): building the SDK's
            # pydantic chunk objects cost more CPU than the rest of the stream handling.
            stream = await self.client.post(
                "/chat/completions",
                body=kwargs,
                cast_to=ChatCompletion,
                stream=True,
                stream_cls=AsyncStream[object],
            )
            out = Completion()
            calls: dict[int, LLMToolCall] = {}
            text: list[str] = []
            async for raw in stream:
                chunk = raw if isinstance(raw, dict) else {}
                usage = chunk.get("usage")
                if isinstance(usage, dict):
                    out.prompt_tokens = usage.get("prompt_tokens")
                    out.completion_tokens = usage.get("completion_tokens")
                choices = chunk.get("choices")
                if not choices or not isinstance(choices[0], dict):
                    continue
                choice = choices[0]
                delta = choice.get("delta")
                if not isinstance(delta, dict):
                    delta = {}
                content = delta.get("content")
                if content:
                    text.append(content)
                    if on_text is not None:
                        await on_text("".join(text))
                for tc in delta.get("tool_calls") or []:
                    if not isinstance(tc, dict):
                        continue
                    index = tc.get("index", 0)
                    call = calls.setdefault(index, LLMToolCall(id="", name="", arguments=""))
                    if tc.get("id"):
                        call.id = tc["id"]
                    fn = tc.get("function")
                    if isinstance(fn, dict):
                        if fn.get("name"):
                            call.name += fn["name"]
                        if fn.get("arguments"):
                            call.arguments += fn["arguments"]
                if choice.get("finish_reason"):
                    out.finish_reason = choice["finish_reason"]
            out.content = "".join(text)
            out.tool_calls = [calls[i] for i in sorted(calls)]
            for n, call in enumerate(out.tool_calls):
                call.id = call.id or f"call_{n}"
            return out

        return await self._with_retries(once)

    async def complete_text(
        self, messages: list[dict[str, Any]], max_tokens: int | None = None
    ) -> str:
        """A plain, non-streamed completion's text (summaries, code generation)."""

        async def once() -> Completion:
            kwargs: dict[str, Any] = {"model": self.model, "messages": messages}
            if max_tokens:
                kwargs["max_tokens"] = max_tokens
            resp = await self.client.post("/chat/completions", body=kwargs, cast_to=ChatCompletion)
            content = resp.choices[0].message.content if resp.choices else None
            return Completion(content=content or "")

        return (await self._with_retries(once)).content

    async def list_models(self) -> list[str]:
        page = await self.client.models.list()
        return [m.id for m in page.data]


def _kind(exc: Exception) -> str:
    if isinstance(exc, openai.APITimeoutError):
        return "timed out"
    if isinstance(exc, openai.APIConnectionError):
        return "connection failed"
    return type(exc).__name__


def _describe(exc: openai.APIStatusError) -> str:
    try:
        body = exc.response.json()
        message = body.get("error", {}).get("message") if isinstance(body, dict) else None
    except Exception:
        message = None
    return f"HTTP {exc.status_code}: {message or exc.message}"[:300]
