"""The model relay: how a generation job's OpenCode reaches the model without the API key.

An HTTP server on a Unix socket in the bot process, one socket per job (`open`). The job's
sandbox has a network namespace of its own holding only loopback; forward.js, in there,
passes connections to 127.0.0.1:<port> on to the job's socket (its folder bound into the
sandbox), and OpenCode's config names that endpoint with no key. Here each request gets the
Authorization header and goes on to LLM_BASE_URL; the answer (a stream of events, usually)
comes back as it arrives. Only the chat completions and models endpoints are relayed, so
the key opens nothing else.

The socket is the job's alone: its folder 0700 and the socket 0600, both owned by the job's
user (the throwaway uid when the bot is root), so no other local account can spend the
bot's key through it. What passes is held to what the bot itself would ask: only the models
the bot offers, never more output than LLM_MAX_OUTPUT_TOKENS, the budgets checked before
each call and its usage recorded after it (tools/chat.py Metering, the usage feature's part)
for the user the job is for.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import tempfile
from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from tools.chat import Completion, LLMToolCall, Metering, Usage
from tools.code.tree import remove_tree
from tools.model_call import ModelCall

if TYPE_CHECKING:
    # The server is imported when a job opens one: the code feature is set up in every
    # process that builds the app, most of which run no OpenCode job.
    from aiohttp import web

log = logging.getLogger(__name__)

RELAYED = {("POST", "chat/completions"), ("GET", "models")}
SOCKET_NAME = "model.sock"
BODY_LIMIT = 32 * 1024 * 1024
ANSWER_KEPT = 4 * 1024 * 1024  # of a non-streamed answer, read for its usage
# A hop-by-hop or framing header is not passed on: both sides frame their own messages.
# The body is sent again as JSON, under a type of our own.
DROPPED = {
    "authorization",
    "host",
    "content-length",
    "transfer-encoding",
    "connection",
    "content-type",
}
KEPT_RESPONSE = ("content-type", "retry-after")
LIMIT_FIELDS = ("max_tokens", "max_completion_tokens")
TIMEOUT = httpx.Timeout(600.0, connect=15.0)  # a job's model call may think a while


@dataclass(frozen=True)
class RelayJob:
    """Whom a job's calls are for (metered and budgeted as theirs) and which models it may
    ask for (the bot's: the job's own first)."""

    call: ModelCall
    models: tuple[str, ...]


@dataclass(eq=False)
class ModelRelay:
    base_url: str
    _key: str | None = field(repr=False)
    _: KW_ONLY
    max_output_tokens: int | None = None
    metering: Metering | None = None
    _client: httpx.AsyncClient | None = field(default=None, init=False)
    # A job's folder: its socket's server.
    _sockets: dict[Path, web.AppRunner] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        self.base_url = self.base_url.rstrip("/")

    async def open(self, job: RelayJob, uid: int | None) -> Path:
        """A new folder holding the job's socket (bound into its sandbox), owned by `uid`
        (the job's throwaway uid when we are root) and closed to everyone else."""
        from aiohttp import web

        if self._client is None:
            self._client = httpx.AsyncClient(timeout=TIMEOUT)
        folder = Path(tempfile.mkdtemp(prefix="sidekick-model-"))  # 0700
        try:
            app = web.Application(client_max_size=BODY_LIMIT)
            app.router.add_route("*", "/{tail:.*}", partial(self._handle, job))
            # A job that ended leaves no connection to wait for: its sandbox is gone.
            runner = web.AppRunner(app, access_log=None, shutdown_timeout=5.0)
            await runner.setup()
            self._sockets[folder] = runner
            path = folder / SOCKET_NAME
            await web.UnixSite(runner, str(path)).start()
            os.chmod(path, 0o600)
            if uid is not None:
                for item in (folder, path):
                    os.chown(item, uid, uid)
        except BaseException:
            await self.release(folder)
            raise
        return folder

    async def release(self, folder: Path) -> None:
        """Close the job's socket and whatever still passes through it."""
        runner = self._sockets.pop(folder, None)
        if runner is not None:
            await runner.cleanup()
        remove_tree(folder)

    async def close(self) -> None:
        for folder in list(self._sockets):
            await self.release(folder)
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    async def _handle(self, job: RelayJob, request: web.Request) -> web.StreamResponse:
        # OpenCode's base URL is http://127.0.0.1:<port>/v1: the path after /v1 is the
        # endpoint, appended to LLM_BASE_URL (which ends in its own /v1, or whatever it has).
        from aiohttp import web

        tail = request.match_info["tail"].removeprefix("v1/").strip("/")
        if (request.method, tail) not in RELAYED:
            return _error(404, f"the model relay passes on only {sorted(RELAYED)}")
        if tail == "models":  # the bot's models, not everything the endpoint has
            listed = [{"id": m, "object": "model", "owned_by": "sidekick"} for m in job.models]
            return web.json_response({"object": "list", "data": listed})
        try:
            body = json.loads(await request.read())
        except ValueError:
            body = None
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return _error(400, "expected a chat completion request (JSON with messages)")
        if body.get("model") not in job.models:
            offered = ", ".join(job.models)
            return _error(403, f"model {str(body.get('model'))[:100]!r} is not offered: {offered}")
        self._cap(body)
        if self.metering is not None:
            refusal = await self.metering.refusal(job.call.user_id)
            if refusal is not None:
                return _error(403, refusal)
        return await self._relay(job, request, tail, body)

    def _cap(self, body: dict[str, Any]) -> None:
        """Never more output than the bot's own calls may ask for."""
        limit = self.max_output_tokens
        if limit is None:
            return
        asked = [f for f in LIMIT_FIELDS if f in body]
        for name in asked:
            value = body[name]
            ok = isinstance(value, int) and not isinstance(value, bool) and 0 < value
            body[name] = min(value, limit) if ok else limit
        if not asked:
            body["max_tokens"] = limit

    async def _relay(
        self, job: RelayJob, request: web.Request, tail: str, body: dict[str, Any]
    ) -> web.StreamResponse:
        assert self._client is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in DROPPED}
        headers["content-type"] = "application/json"
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        upstream = self._client.build_request(
            request.method, f"{self.base_url}/{tail}", headers=headers, content=json.dumps(body)
        )
        try:
            answer = await self._client.send(upstream, stream=True)
        except httpx.HTTPError as exc:
            log.warning("model relay: %s failed: %s", tail, type(exc).__name__)
            return _error(502, f"the model endpoint is unreachable ({type(exc).__name__})")
        from aiohttp import web

        seen = _Answer(streamed=bool(body.get("stream")))
        resp = web.StreamResponse(status=answer.status_code)
        try:
            for name in KEPT_RESPONSE:
                if name in answer.headers:
                    resp.headers[name] = answer.headers[name]
            await resp.prepare(request)
            async for chunk in answer.aiter_bytes():
                seen.feed(chunk)
                await resp.write(chunk)
            await resp.write_eof()
            return resp
        except (ConnectionError, httpx.HTTPError) as exc:
            # The job ended mid-answer (killed, aborted), or the endpoint broke off.
            log.info("model relay: %s cut short: %s", tail, type(exc).__name__)
            return resp
        finally:
            await answer.aclose()
            if answer.status_code == 200 and self.metering is not None:
                out = seen.completion(str(body.get("model")))
                await asyncio.shield(self._record(job, out, body))

    async def _record(self, job: RelayJob, out: Completion, body: dict[str, Any]) -> None:
        assert self.metering is not None
        tools = body.get("tools") if isinstance(body.get("tools"), list) else None
        try:
            await self.metering.record_call(job.call, out, body["messages"], tools)
        except Exception:  # the job's answer is worth more than its usage row
            log.exception("model relay: could not record a call's usage")


def _error(status: int, message: str) -> web.Response:
    from aiohttp import web

    return web.json_response({"error": {"message": message}}, status=status)


@dataclass
class _Answer:
    """What the model answered, read as it passes: the text, the calls and the usage the
    meter needs (it estimates the usage when the endpoint sends none)."""

    streamed: bool
    buffer: bytes = b""
    text: list[str] = field(default_factory=list)
    calls: dict[int, LLMToolCall] = field(default_factory=dict)
    usage: Usage | None = None
    model: str = ""
    provider_id: str | None = None

    def feed(self, chunk: bytes) -> None:
        if not self.streamed:
            if len(self.buffer) < ANSWER_KEPT:
                self.buffer += chunk
            return
        self.buffer += chunk
        *lines, self.buffer = self.buffer.split(b"\n")
        for line in lines:
            data = line.strip()
            if data.startswith(b"data:") and data[5:].strip() != b"[DONE]":
                self._read(_json(data[5:]), "delta")
        if len(self.buffer) > ANSWER_KEPT:  # no line ends: not an event stream
            self.buffer = b""

    def _read(self, event: Any, part: str) -> None:
        if not isinstance(event, dict):
            return
        self.model = str(event.get("model") or self.model)
        self.provider_id = str(event.get("id") or "") or self.provider_id
        usage = event.get("usage")
        if isinstance(usage, dict):
            details = usage.get("prompt_tokens_details")
            cached = details.get("cached_tokens") if isinstance(details, dict) else 0
            self.usage = Usage(
                prompt_tokens=_int(usage.get("prompt_tokens")),
                completion_tokens=_int(usage.get("completion_tokens")),
                cached_tokens=_int(cached),
            )
        for choice in event.get("choices") or ():
            said = choice.get(part) if isinstance(choice, dict) else None
            if not isinstance(said, dict):
                continue
            if isinstance(said.get("content"), str):
                self.text.append(said["content"])
            for i, c in enumerate(said.get("tool_calls") or ()):
                if not isinstance(c, dict):
                    continue
                fn = c.get("function") or {}
                call = self.calls.setdefault(_int(c.get("index", i)), LLMToolCall("", "", ""))
                call.id = str(c.get("id") or call.id)
                call.name += str(fn.get("name") or "")
                call.arguments += str(fn.get("arguments") or "")

    def completion(self, asked: str) -> Completion:
        if not self.streamed:
            self._read(_json(self.buffer), "message")
        return Completion(
            content="".join(self.text),
            tool_calls=list(self.calls.values()),
            usage=self.usage,
            model=self.model or asked,
            provider_id=self.provider_id,
        )


def _json(data: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        return None


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def relay_models(default: str, others: Sequence[str]) -> tuple[str, ...]:
    """The models a job may ask for: its own first, then the others the bot offers."""
    return tuple(dict.fromkeys([default, *others]))
