"""The model relay's server (relay.py): an aiohttp app on a job's Unix socket that passes
the chat completions and models endpoints on to the model, each call held to what the bot
itself would ask and metered as the job's user's. Imported where a job opens its socket
(opencode.py): the code feature is set up in every process that builds the app, most of
which run no OpenCode job."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import tempfile
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import httpx
from aiohttp import web

from tools.chat import Completion, LLMToolCall, Usage
from tools.code.relay import SOCKET_NAME, ModelRelay, RelayJob

log = logging.getLogger(__name__)

RELAYED = {("POST", "chat/completions"), ("GET", "models")}
BODY_LIMIT = 32 * 1024 * 1024
ANSWER_KEPT = 4 * 1024 * 1024  # of a non-streamed answer, read for its usage
KEPT_RESPONSE = ("content-type", "retry-after")


async def open_relay(relay: ModelRelay, job: RelayJob, uid: int | None) -> Path:
    """A new folder holding the job's socket (bound into its sandbox), owned by `uid` (the
    job's throwaway uid when we are root) and closed to everyone else; `relay.release`
    closes it."""
    folder = Path(tempfile.mkdtemp(prefix="sidekick-model-"))  # 0700
    try:
        app = web.Application(client_max_size=BODY_LIMIT)
        app.router.add_route("*", "/{tail:.*}", partial(_handle, relay, job))
        # A job that ended leaves no connection to wait for: its sandbox is gone.
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=5.0)
        await runner.setup()
        relay.sockets[folder] = runner
        path = folder / SOCKET_NAME
        await web.UnixSite(runner, str(path)).start()
        os.chmod(path, 0o600)
        if uid is not None:
            for item in (folder, path):
                os.chown(item, uid, uid)
    except BaseException:
        await relay.release(folder)
        raise
    return folder


async def _handle(relay: ModelRelay, job: RelayJob, request: web.Request) -> web.StreamResponse:
    # OpenCode's base URL is http://127.0.0.1:<port>/v1: the path after /v1 is the
    # endpoint, appended to LLM_BASE_URL (which ends in its own /v1, or whatever it has).
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
    relay.cap(body)
    if relay.metering is not None:
        refusal = await relay.metering.refusal(job.call.user_id)
        if refusal is not None:
            return _error(403, refusal)
    return await _relay(relay, job, request, tail, body)


async def _relay(
    relay: ModelRelay, job: RelayJob, request: web.Request, tail: str, body: dict[str, Any]
) -> web.StreamResponse:
    try:
        answer = await relay.send(request.method, tail, dict(request.headers), body)
    except httpx.HTTPError as exc:
        log.warning("model relay: %s failed: %s", tail, type(exc).__name__)
        return _error(502, f"the model endpoint is unreachable ({type(exc).__name__})")
    seen = Answer(streamed=bool(body.get("stream")))
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
        if answer.status_code == 200 and relay.metering is not None:
            out = seen.completion(str(body.get("model")))
            await asyncio.shield(relay.record(job, out, body))


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": {"message": message}}, status=status)


@dataclass
class Answer:
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
