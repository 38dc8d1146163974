"""The ChatModel (tools/chat.py) against an OpenAI-compatible server: streamed chat
completions with tool calls and plain completions, with retries and a fallback model, each
try watched for silence; and the context size the server says.

A passing failure (429, 5xx, a timeout, a lost connection, a try that stalls) is tried
again with backoff, and after the quick retries the fallback model (LLM_FALLBACK_MODEL)
gets the request. A chat message is not handed back to its user for an outage: they are
told once that the provider is not answering (and once that a stream went quiet), and the
call goes on trying until LLM_TIMEOUT_S, then ends in one final line. Other calls
(summaries, scheduled tasks, which have retries of their own) give up after the quick
retries with a ProviderError that carries the status, so the user gets one plain sentence.
Every completion carries the provider's token usage when it sent one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import re
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import partial
from typing import Any, TypeVar

from bot.config import Settings
from bot.errors import ProviderError
from bot.llm import constrained
from bot.llm.completion import collect, from_json
from bot.llm.wire import (
    APIConnectionError,
    APIError,
    APIStatusError,
    Ask,
    Endpoint,
    ResponseDataError,
    Stalled,
    StreamDataError,
    StreamErrorEvent,
    first_said,
    open_stream,
)
from bot.llm.written import OPENER, Holdback, Offered, adopt_written, tool_names
from tools.chat import ChatModel, Completion, LLMToolCall, OnText, Usage, shown_tools
from tools.model_call import ModelCall

__all__ = ["Completion", "LLMClient", "LLMToolCall", "OnText", "Usage"]

log = logging.getLogger(__name__)
# Quick retries of one model on 429, 5xx, timeouts, connection errors and stalls, with
# backoff (0.5 s doubling to 8 s): about 15 s of a provider's hiccup is ridden out before
# the fallback model takes over, and (a chat message) the user is told it is waited out.
MAX_RETRIES = 4
# A try that brings nothing new for this long gets one "still waiting" line to the user.
STALL_NOTICE_S = 20.0
STILL_WAITING = (
    "Still waiting for the model: it has gone quiet for a while. The answer follows as soon "
    "as it goes on."
)
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


class OutageOutlasted(ProviderError):
    """The provider kept failing for a passing reason for as long as a message may wait."""

    def __init__(self, what: str, status: int | None, seconds: float) -> None:
        super().__init__(what, status)
        minutes = f"{seconds / 60:.0f} minutes" if seconds >= 120 else f"{seconds:g} s"
        self.advice = (
            f"The model provider has still not answered after {minutes} ({what}), so I have "
            "stopped waiting. Please send your message again later."
        )


def outage_notice(what: str) -> str:
    """The one early line while a chat message waits out an outage."""
    return (
        f"The model provider is not answering ({what}) right now. I have your message and will "
        "answer it as soon as the provider is back."
    )


# -- each try watched for silence ----------------------------------------------------------


def silence_limit(timeout_s: float) -> float:
    """How long a try that has begun answering may bring nothing new before it counts as
    stalled: a fifth of LLM_TIMEOUT_S, at least a minute, at most all of it (before its
    first event only the deadline ends a try: Silence)."""
    return min(timeout_s, max(60.0, timeout_s / 5))


class Silence:
    """One model call's tries watched for silence: a user waiting for the answer hears once
    that the model has gone quiet, and a try that stays silent past its limit ends as
    stalled, a passing failure `LLMClient._call` tries again.

    `watch()` around each try, `heard()` on each event of it. `limit_s` without an
    event (`first_s` before the first) ends the try (Stalled); `notice_s` without one tells
    `on_wait`, once a call."""

    def __init__(
        self, limit_s: float, notice_s: float, on_wait: OnText | None, first_s: float
    ) -> None:
        self.limit_s = limit_s
        # Before a try's first event the server may still be reading the prompt: llama-server
        # sends nothing meanwhile, for minutes on a CPU, and a retry would read it again from
        # the start. `first_s` (the call's deadline) bounds that wait instead of `limit_s`.
        self.first_s = first_s
        self.notice_s = notice_s
        self.on_wait = on_wait
        self.noticed = False
        self._last = 0.0
        self._cm: asyncio.Timeout | None = None
        # The silence check once a try's stream has begun, set again only when it comes due
        # (as the notice's timer is), not moved per streamed chunk.
        self._check: asyncio.TimerHandle | None = None
        # The notice's timer while a try runs (no task per call), then the line being told.
        self._timer: asyncio.TimerHandle | None = None
        self._telling: asyncio.Task[None] | None = None

    def heard(self) -> None:
        loop = asyncio.get_running_loop()
        self._last = loop.time()
        if self._check is None and self._cm is not None:
            # The try's first event: from now on its limit is the silence since the last one.
            self._cm.reschedule(None)
            self._check = loop.call_at(self._last + self.limit_s, self._silent)

    def _silent(self) -> None:
        loop = asyncio.get_running_loop()
        if self._last + self.limit_s > loop.time():
            self._check = loop.call_at(self._last + self.limit_s, self._silent)
        elif self._cm is not None:
            self._cm.reschedule(loop.time())  # the try ends as stalled

    @contextlib.asynccontextmanager
    async def watch(self) -> AsyncIterator[None]:
        loop = asyncio.get_running_loop()
        self._last = loop.time()
        if self.on_wait is not None and not self.noticed:
            self._timer = loop.call_at(self._last + self.notice_s, self._due, self.on_wait)
        cm = self._cm = asyncio.timeout_at(self._last + self.first_s)
        try:
            async with cm:
                yield
        except TimeoutError:
            if not cm.expired():
                raise
            raise Stalled(self.limit_s) from None
        finally:
            self._cm = None
            if self._check is not None:
                self._check.cancel()
                self._check = None
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            if self._telling is not None:  # a line half sent is finished, not cut
                await asyncio.wait({self._telling})
                self._telling = None

    def _due(self, on_wait: OnText) -> None:
        loop = asyncio.get_running_loop()
        # Each event moves the moment on: the timer is set again for it only when it comes,
        # not moved per streamed chunk.
        left = self._last + self.notice_s - loop.time()
        if left > 0:
            self._timer = loop.call_later(left, self._due, on_wait)
            return
        self._timer = None
        self.noticed = True
        self._telling = asyncio.create_task(self._tell(on_wait))

    @staticmethod
    async def _tell(on_wait: OnText) -> None:
        try:
            await on_wait(STILL_WAITING)
        except Exception:  # the answer matters, not this line
            log.debug("the still-waiting line was not shown", exc_info=True)


# -- the context size the server says (LLMClient.context_tokens) ---------------------------


def _positive(value: object) -> int | None:
    return value if isinstance(value, int) and value > 0 else None


def _from_props(raw: Any) -> int | None:
    settings = raw.get("default_generation_settings") if isinstance(raw, dict) else None
    return _positive(settings.get("n_ctx")) if isinstance(settings, dict) else None


def _from_models(raw: Any, model: str, key: str = "n_ctx") -> int | None:
    data = raw.get("data") if isinstance(raw, dict) else None
    for entry in data if isinstance(data, list) else ():
        if isinstance(entry, dict) and entry.get("id") == model:
            meta = entry.get("meta")
            return _positive(meta.get(key)) if isinstance(meta, dict) else None
    return None


_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMBT])\s*$", re.I)
_SCALE = {"K": 10**3, "M": 10**6, "B": 10**9, "T": 10**12}


def _ollama_size(raw: Any) -> int | None:
    """Ollama's `details.parameter_size` ("1.5B", "494.03M") in parameters."""
    details = raw.get("details") if isinstance(raw, dict) else None
    size = details.get("parameter_size") if isinstance(details, dict) else None
    found = _SIZE.match(size) if isinstance(size, str) else None
    return int(float(found[1]) * _SCALE[found[2].upper()]) if found else None


def _from_ollama(raw: Any) -> int | None:
    if not isinstance(raw, dict):
        return None
    for line in str(raw.get("parameters") or "").splitlines():
        name, _, value = line.strip().partition(" ")
        if name == "num_ctx" and value.strip().isdigit():
            return int(value.strip())
    info = raw.get("model_info")
    found = (
        [v for k, v in info.items() if k.endswith(".context_length")]
        if isinstance(info, dict)
        else []
    )
    return _positive(found[0]) if found else None


class ContextSize:
    """How many tokens the model's context holds: LLM_CONTEXT_TOKENS when set, else what the
    server says where it says it, asked once per model.

    - llama.cpp: GET /props (`default_generation_settings.n_ctx`), or the `meta.n_ctx` of its
      model list;
    - Ollama: POST /api/show, the `num_ctx` it runs with when set, else `model_info`'s
      `<arch>.context_length`.
    Other servers (and cloud providers) do not say: the answer is None, unknown. A server
    that could not be asked (down, or llama-server's 503 while it loads its model) is asked
    again with the next message rather than taken for one that does not say.
    """

    what = "context"

    def __init__(self, endpoint: Endpoint, configured: int = 0) -> None:
        self.endpoint = endpoint
        self.configured = configured
        self.known: dict[str, int | None] = {}

    async def tokens(self, model: str) -> int | None:
        if self.configured:
            return self.configured
        if model in self.known:
            return self.known[model]
        found, heard = await first_said(self.endpoint, self._asks(model))
        if heard:
            self.known[model] = found
            log.info("%s of %s: %s", self.what, model, found or "unknown")
        return found

    def _asks(self, model: str) -> list[Ask[int]]:
        base, root = self.endpoint.base_url, self.endpoint.root
        return [
            ("GET", root + "/props", None, _from_props),
            ("GET", base + "/models", None, lambda raw: _from_models(raw, model)),
            ("POST", root + "/api/show", {"model": model}, _from_ollama),
        ]


class ModelSize(ContextSize):
    """How many parameters the model has, where the server says, asked once per model:
    llama.cpp's model list (`meta.n_params`), Ollama's /api/show (`details.parameter_size`,
    "1.5B"); else None (cloud providers do not say)."""

    what = "parameters"

    def _asks(self, model: str) -> list[Ask[int]]:
        base, root = self.endpoint.base_url, self.endpoint.root
        return [
            ("GET", base + "/models", None, lambda raw: _from_models(raw, model, "n_params")),
            ("POST", root + "/api/show", {"model": model}, _ollama_size),
        ]


# -- the calls ----------------------------------------------------------------------------


class LLMClient(ChatModel):
    """Chat completions against an OpenAI-compatible endpoint, over httpx (bot/llm/wire.py):
    the ChatModel (tools/chat.py) that every wrapper ends at.

    The streamed chat is read by wire.open_stream; plain completions and the model list
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
        stall_notice_s: float = STALL_NOTICE_S,
    ) -> None:
        key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else "none"
        self.model = settings.llm_model
        self.max_retries = MAX_RETRIES
        self.deadline = settings.llm_timeout_s
        self.max_output_tokens = settings.llm_max_output_tokens
        self.retry_base_delay = retry_base_delay
        self.retry_max_delay = retry_max_delay
        self.stall_notice_s = stall_notice_s
        self.silence = silence_limit(settings.llm_timeout_s)
        self.client = Endpoint(settings.llm_base_url, key, self.silence, http_client=http_client)
        self.context = ContextSize(self.client, settings.llm_context_tokens)
        self.size = ModelSize(self.client)
        self.constraint = constrained.Constraint(settings.llm_constrained_calls)
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
                self.silence,
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

    async def parameters(self, model: str | None = None) -> int | None:
        """The model's size in parameters where the server says (llama.cpp, Ollama)."""
        return await self.size.tokens(model or self.model)

    async def _call(
        self,
        model: str | None,
        what: Callable[[Endpoint, str, Silence], Awaitable[Completion]],
        on_wait: OnText | None = None,
    ) -> Completion:
        """`what` on the requested model, tried again on a passing failure (429, 5xx,
        connection, a stall) with backoff: MAX_RETRIES quick retries, then the fallback
        model's as many. Past those, a call someone waits for (`on_wait`: a chat message)
        tells them once and goes on trying, both models in turn, at the backoff's ceiling;
        any other call gives up. Everything ends within LLM_TIMEOUT_S."""
        primary = model or self.model
        fallback = self.fallback_model if self.fallback_model != primary else None
        per_model = self.max_retries + 1
        quick = per_model * (2 if fallback else 1)
        silence = Silence(self.silence, self.stall_notice_s, on_wait, first_s=self.deadline)
        loop = asyncio.get_running_loop()
        started = loop.time()
        failures, told, primary_failure = 0, False, ""
        last: tuple[str, int | None] | None = None  # the latest passing failure
        try:
            async with asyncio.timeout(self.deadline):
                while True:
                    on_fallback = fallback is not None and (
                        per_model <= failures < quick or (failures >= quick and failures % 2)
                    )
                    client = self.fallback_client if on_fallback else self.client
                    name = fallback if on_fallback and fallback else primary
                    try:
                        out = await what(client, name, silence)
                    except APIError as exc:
                        retry, retry_after, what_failed, status = self._passing(exc)
                        failure: BaseException = exc
                        if not retry:  # not worth a retry; the fallback model may still do
                            if not fallback or failures >= per_model:
                                raise ProviderError(what_failed, status) from exc
                            failures = per_model - 1
                    else:
                        if on_fallback:
                            out.fallback_from, out.fallback_reason = primary, primary_failure
                        return out
                    failures += 1
                    last = (what_failed, status)
                    primary_failure = primary_failure if on_fallback else what_failed
                    if failures == per_model and fallback and failures < quick:
                        log.warning("model %s failed (%s); trying the fallback %s",
                                    primary, what_failed, fallback)  # fmt: skip
                    if failures >= quick and on_wait is None:
                        log.warning("model provider failed after %d tries: %s",
                                    failures, what_failed)  # fmt: skip
                        raise ProviderError(what_failed, status) from failure
                    delay = self._backoff(failures, quick, retry_after)
                    if loop.time() - started + delay >= self.deadline:
                        log.warning("model provider still failing after %d tries (%s): "
                                    "stopped waiting", failures, what_failed)  # fmt: skip
                        raise OutageOutlasted(what_failed, status, self.deadline) from failure
                    if failures >= quick and on_wait is not None and not told:
                        told = True
                        log.warning("model provider failing (%s): waiting it out, up to %g s",
                                    what_failed, self.deadline)  # fmt: skip
                        await on_wait(outage_notice(what_failed))
                    log.info("model provider %s; retry %d in %.2fs", what_failed, failures, delay)
                    await asyncio.sleep(delay)
        except TimeoutError:
            if last is not None:  # the deadline came mid-try of an outage: the same last line
                log.warning("model provider still failing at the deadline (%s): stopped "
                            "waiting", last[0])  # fmt: skip
                raise OutageOutlasted(last[0], last[1], self.deadline) from None
            log.warning("model %s gave no complete answer within %gs", primary, self.deadline)
            raise DeadlinePassed(self.deadline) from None

    def _passing(self, exc: APIError) -> tuple[bool, float | None, str, int | None]:
        """(a passing failure?, the server's Retry-After, what failed, its status); a
        ProviderError for a refusal (a 4xx, the context overflowed)."""
        status = exc.status_code if isinstance(exc, APIStatusError) else None
        said = f"{exc.message} {exc.body}"
        if isinstance(exc, APIStatusError | StreamErrorEvent) and _OVERFLOW.search(said):
            raise ContextOverflow(exc.kind, status) from exc
        if not isinstance(exc, APIStatusError):
            # A malformed stream is a broken connection or proxy as far as a retry is concerned.
            return isinstance(exc, APIConnectionError | StreamDataError), None, exc.kind, None
        if exc.status_code != 429 and exc.status_code < 500:
            described = f"HTTP {status}: {exc.error_message or exc.message}"[:300]
            raise ProviderError(described, status) from exc
        after = None
        with contextlib.suppress(ValueError):
            after = float(exc.headers.get("retry-after") or 0) or None
        return True, after, exc.kind, status

    def _backoff(self, failures: int, quick: int, retry_after: float | None) -> float:
        """Seconds before the next try: doubling within each model's quick retries, then
        (waiting out an outage) at the ceiling, so an answer comes within seconds of the
        provider's return; a server's Retry-After (capped) wins."""
        if retry_after:
            return min(retry_after, 30.0)
        per_model = self.max_retries + 1
        if failures < quick:
            if not failures % per_model:
                return 0.0  # the fallback model takes over at once
            step = failures % per_model - 1
        else:
            step = failures - quick + self.max_retries
        # The exponent is capped: waiting out an outage counts thousands of failures.
        delay = min(self.retry_max_delay, self.retry_base_delay * 2.0 ** min(step, 32))
        return delay * (0.75 + random.random() / 2)

    async def _adapting(
        self, body: dict[str, Any], send: Callable[[], Awaitable[T]], endpoint: Endpoint
    ) -> T:
        """`send()`, once more after each refused field `_adapted` took out of `body`."""
        while True:
            try:
                return await send()
            except APIStatusError as exc:
                if not self._adapted(exc, body, endpoint):
                    raise

    def _adapted(self, exc: APIStatusError, body: dict[str, Any], endpoint: Endpoint) -> bool:
        """Whether a 400 was a server refusing one of our optional fields, now changed in
        `body` (and for later calls): stream_options (older servers; usage is then
        estimated), max_tokens (OpenAI's reasoning models want max_completion_tokens),
        response_format (a server that cannot hold a reply to a schema)."""
        said = str(exc)
        if exc.status_code not in (400, 422):  # Mistral answers 422 to a field it does not take
            return False
        if re.search(r"response_format|json_schema|grammar", said) and "response_format" in body:
            log.warning("the model endpoint refuses response_format: tool calls go unheld")
            del body["response_format"]
            self.constraint.refused(endpoint)
        elif "stream_options" in said and body.pop("stream_options", None) is not None:
            log.warning("the model endpoint rejects stream_options; usage will be estimated")
            self.ask_usage = False
        elif "max_completion_tokens" in said and "max_tokens" in body:
            body["max_completion_tokens"] = body.pop("max_tokens")
            self.limit_field = "max_completion_tokens"
        else:
            return False
        return True

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
        on_wait: OnText | None = None,
    ) -> Completion:
        """One streamed completion (`model`: default LLM_MODEL); `on_text` gets the whole
        text so far after each delta. With `on_wait` (someone waits for this answer) an
        outage is waited out, and `on_wait` gets the line to show them: once that the
        provider is not answering, once that a stream went quiet.

        Where the server can (bot/llm/constrained.py), a reply with tools offered is held to
        an answer or one valid call. A small model may still write a tool call out as text
        (written.adopt_written): naming an offered tool, it becomes the completion's tool
        call, and its text is never shown. A written call begins with one of OPENER's
        characters: text without one (most replies) is shown and kept as it is, and the
        written-call reader is not asked."""
        offered: Offered | None = None  # worked out when text may hold a written call

        def names() -> Offered:
            nonlocal offered
            if offered is None:
                offered = tool_names(tools or [])
            return offered

        holding: Holdback | None = None  # from the first text that may begin a call
        passed = ""  # the text shown before it

        async def held_back(text: str) -> None:
            nonlocal holding, passed
            assert on_text is not None
            if holding is None:
                if OPENER.search(text) is None:
                    passed = text
                    await on_text(text)
                    return
                holding = Holdback(on_text, names(), passed)
            await holding(text)

        shown = held_back if on_text is not None and tools else on_text

        async def once(client: Endpoint, model: str, silence: Silence) -> Completion:
            body = self._body(model, messages, None)
            body["stream"] = True
            size = partial(self.parameters, model)
            held = local = False
            if tools and client.base_url not in self.constraint.free:
                held, local = await self.constraint.plan(client, size)
            if tools:
                body["tools"] = shown_tools(tools)
                if local:
                    body["temperature"] = constrained.TOOL_TEMPERATURE
                if held:
                    due = constrained.answer_due(messages)
                    body["response_format"] = constrained.response_format([] if due else tools)
            if self.ask_usage:
                # The provider's own token counts arrive in a last chunk without choices.
                body["stream_options"] = {"include_usage": True}
            async with silence.watch():
                events = await self._adapting(
                    body, lambda: open_stream(client, body, silence.heard), client
                )
                drafts = constrained.drafts(shown) if "response_format" in body else shown
                out = await collect(events, model, drafts)
            if "response_format" in body and not constrained.adopt(out, names()):
                log.info("a held reply was no answer or call: read as written")
            return out

        completion = await self._call(model, once, on_wait)
        if tools and not completion.tool_calls and OPENER.search(completion.content):
            adopt_written(completion, names())
        return completion

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

        async def once(client: Endpoint, model: str, silence: Silence) -> Completion:
            body = self._body(model, messages, max_tokens)
            async with silence.watch():
                raw = await self._adapting(
                    body, lambda: client.call("POST", "/chat/completions", body), client
                )
            out = from_json(raw, model)
            if out is None:
                raise ResponseDataError("not a chat completion")
            if out.truncated:  # a summary or program cut short: its caller gets what there is
                log.info(
                    "a %s-token completion was cut at its output limit", body.get(self.limit_field)
                )
            return out

        return await self._call(model, once)

    async def list_models(self) -> list[str]:
        page = await self.client.call("GET", "/models")
        data = page.get("data") if isinstance(page, dict) else None
        if not isinstance(data, list):
            raise ResponseDataError("not a model list")
        return [m["id"] for m in data if isinstance(m, dict) and isinstance(m.get("id"), str)]
