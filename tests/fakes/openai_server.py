"""A scripted OpenAI-compatible server on 127.0.0.1, speaking the real wire format.

Each chat completion takes the next scripted turn (text, tool calls or an HTTP error);
with the script empty it answers by `responder` (default: echo the last user message).
`failing = 500` is an outage window: every chat completion fails so until it is None.
A Text with `pause` stalls after its first chunk (a stream that goes quiet).
Streaming answers use OpenAI's chunk format exactly, as real providers send it. A `Lane`
scripts a second client apart (OpenCode, which the bot runs against the same server);
`authorizations` records each chat request's Authorization header.
`/v1/audio/transcriptions` takes the multipart form Whisper endpoints take and answers
`{"text": ...}` from `transcripts` (in order; then "transcript of <filename>"), or fails
with `transcribe_error` (an HTTP status) when set.
`/v1/audio/speech` takes OpenAI's JSON body and answers `speech_audio` (OGG/Opus bytes by
default; set `speech_audio`/`speech_type` to play an endpoint that sends something else),
400 without `input`, or `speech_error` when set; `speeches` records each body.
`junk_bytes` set: both audio routes answer 200 with that many junk bytes, streamed without
a Content-Length (a broken or hostile endpoint); `junk_sent` counts what the client took.
Like OpenAI, a streamed answer ends with a usage chunk (no choices) when the request asks
for `stream_options: {include_usage: true}`; `send_usage=False` plays a provider that never
sends usage. A turn's `usage` dict replaces the default counts (about 4 characters a token).
With `n_ctx` set it plays llama.cpp's llama-server run with `-c n_ctx`: `GET /props` says the
context size as llama-server does, and a chat request whose prompt does not fit is refused
with llama-server's 400 (`refused` records each refusal); without it `/props` is a 404, as
on servers that do not say.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from bot.agent.prompt import without_context


@dataclass
class Text:
    text: str
    chunk: int = 7  # characters per streamed delta
    delay: float = 0.0  # seconds between chunks
    pause: float = 0.0  # seconds of silence after the first chunk (a stalled stream)
    usage: dict[str, Any] | None = None
    finish: str = "stop"  # "length": a reply cut at max_tokens
    # A slow server: the answer waits until this is set (its request is recorded at once).
    after: asyncio.Event | None = None


@dataclass
class Calls:
    calls: list[tuple[str, Any]]  # (tool name, arguments as dict or raw string)
    text: str = ""
    usage: dict[str, Any] | None = None


@dataclass
class Error:
    status: int
    message: str = "scripted failure"
    retry_after: float | None = None


@dataclass
class KeepAlive:
    """A 200 stream of `:` comment lines every `every` seconds and never an answer (a server
    stuck on its prompt, as llama.cpp sends them while it reads one)."""

    every: float = 0.05


Turn = Text | Calls | Error | KeepAlive


@dataclass
class Lane:
    """A second client of the same server with a script of its own (the coding agent the
    bot runs, OpenCode, asking the same model): a request that `matches` takes the lane's
    next turn, or `after(body)` once its script is used up; the main script never sees it."""

    matches: Callable[[dict[str, Any]], bool]
    script: list[Turn] = field(default_factory=list)
    after: Callable[[dict[str, Any]], Turn] = lambda body: Text("done")
    requests: list[dict[str, Any]] = field(default_factory=list)

    def turn(self, body: dict[str, Any]) -> Turn:
        self.requests.append(body)
        return self.script.pop(0) if self.script else self.after(body)


def prompt_tokens(body: dict[str, Any]) -> int:
    """The prompt's size in tokens about as llama-server counts it after its chat template.

    Fitted to the exchanges recorded with a real llama-server (build 7e4c0a9, Qwen2.5,
    /work/shared/fixtures/llm/llama-server-b7e4c0a9, the `prompt_tokens` of each answer): 3.5
    characters a token of text, 5 tokens a message for the template's markers, and with tools
    3.2 characters a token of their compact JSON plus 120 for the template's tools preamble.
    On those 23 requests this gives 0.89-1.27 of the real count (median 1.04).
    """
    chars = 0
    for m in body.get("messages", []):
        content = m.get("content") or ""
        chars += len(content if isinstance(content, str) else json.dumps(content))
        if m.get("tool_calls"):
            chars += len(json.dumps(m["tool_calls"]))
    tokens = chars / 3.5 + 5 * len(body.get("messages", []))
    if body.get("tools"):
        tokens += len(json.dumps(body["tools"], separators=(",", ":"))) / 3.2 + 120
    return int(tokens) + 1


def props(n_ctx: int, model: str) -> dict[str, Any]:
    """GET /props as llama-server answers it: the shape its README documents (tools/server/
    README.md, "GET /props": `default_generation_settings` with the slot's `n_ctx`,
    `total_slots`, `model_path`, `chat_template`, `modalities`, `build_info`), trimmed to
    fields a client may read; the build is the one the fixtures were recorded with."""
    return {
        "default_generation_settings": {
            "id": 0,
            "id_task": -1,
            "n_ctx": n_ctx,
            "speculative": False,
            "is_processing": False,
            "params": {"n_predict": -1, "temperature": 0.8, "top_k": 40, "top_p": 0.95},
        },
        "total_slots": 1,
        "model_path": f"/models/{model}.gguf",
        "chat_template": "{%- for message in messages %}...{%- endfor %}",
        "modalities": {"vision": False, "audio": False},
        "build_info": "b1-7e4c0a9",
    }


def too_long(n_prompt: int, n_ctx: int) -> dict[str, Any]:
    """llama-server's refusal of a prompt longer than its context, byte for byte the body
    recorded in /work/shared/fixtures/llm/llama-server-b7e4c0a9/0021-resp.txt."""
    return {
        "error": {
            "code": 400,
            "message": f"request ({n_prompt} tokens) exceeds the available context size "
            f"({n_ctx} tokens), try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": n_prompt,
            "n_ctx": n_ctx,
        }
    }


def echo(body: dict[str, Any]) -> Turn:
    users = [m for m in body.get("messages", []) if m.get("role") == "user"]
    content = users[-1]["content"] if users else ""
    if isinstance(content, list):  # text + image parts: echo the text
        content = "\n".join(p.get("text", "") for p in content if p.get("type") == "text")
    # What the user wrote, not the per-message context block Sidekick puts before it.
    return Text(f"echo: {without_context(content)}")


@dataclass
class FakeOpenAI:
    script: list[Turn] = field(default_factory=list)
    responder: Callable[[dict[str, Any]], Turn] = echo
    models: list[str] = field(default_factory=lambda: ["fake-model"])
    requests: list[dict[str, Any]] = field(default_factory=list)
    send_usage: bool = True
    reject_stream_options: bool = False  # an older server: 400 when the field is present
    reject_response_format: bool = False  # a server that cannot hold a reply to a schema
    host: str = "127.0.0.1"
    port: int = 0
    _runner: web.AppRunner | None = None
    transcripts: list[str] = field(default_factory=list)
    transcriptions: list[dict[str, Any]] = field(default_factory=list)  # form fields + bytes
    transcribe_error: int | None = None
    transcribe_delay: float = 0.0
    speech_audio: bytes = b"OggS\x00\x02fake-opus-voice"
    speech_type: str = "audio/ogg"
    speech_error: int | None = None
    speeches: list[dict[str, Any]] = field(default_factory=list)
    junk_bytes: int = 0
    junk_sent: int = 0
    n_ctx: int | None = None  # llama-server's context size (`-c`); None: a server that won't say
    props: bool = True  # False: refuses past n_ctx but does not say it (a proxy in front)
    # The model's size as llama-server's model list says it (`meta.n_params`); None: unsaid.
    n_params: int | None = None
    refused: list[dict[str, Any]] = field(default_factory=list)  # requests refused as too long
    lanes: list[Lane] = field(default_factory=list)
    # The Authorization header of every chat request, in order (None: it had none).
    authorizations: list[str | None] = field(default_factory=list)
    # While set, every chat completion fails with this status (an outage window), the
    # script untouched; `failed` counts the requests it refused.
    failing: int | None = None
    failed: int = 0

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def add(self, *turns: Turn) -> None:
        self.script.extend(turns)

    async def start(self) -> FakeOpenAI:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/props", self._props)  # beside /v1, as on llama-server
        app.router.add_post("/v1/audio/transcriptions", self._transcribe)
        app.router.add_post("/v1/audio/speech", self._speech)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        self.port = self._runner.addresses[0][1]
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _models(self, request: web.Request) -> web.Response:
        data: list[dict[str, Any]] = [
            {"id": m, "object": "model", "created": 0, "owned_by": "test"} for m in self.models
        ]
        if self.n_params is not None:  # llama-server's `meta` (its model list, 2026)
            for entry in data:
                entry["meta"] = {"n_params": self.n_params, "n_ctx": self.n_ctx or 4096}
        return web.json_response({"object": "list", "data": data})

    async def _props(self, request: web.Request) -> web.Response:
        if self.n_ctx is None or not self.props:
            raise web.HTTPNotFound()
        return web.json_response(props(self.n_ctx, self.models[0]))

    async def _transcribe(self, request: web.Request) -> web.StreamResponse:
        form: dict[str, Any] = {"authorization": request.headers.get("Authorization")}
        if request.content_type != "multipart/form-data":
            return web.json_response({"error": {"message": "multipart expected"}}, status=400)
        reader = await request.multipart()
        while (part := await reader.next()) is not None:
            if part.filename:  # type: ignore[union-attr]
                form["filename"] = part.filename  # type: ignore[union-attr]
                form["content_type"] = part.headers.get("Content-Type")  # type: ignore[union-attr]
                form["file"] = await part.read()  # type: ignore[union-attr]
            else:
                form[part.name or ""] = await part.text()  # type: ignore[union-attr]
        self.transcriptions.append(form)
        if self.junk_bytes:
            return await self._junk(request)
        if self.transcribe_delay:
            await asyncio.sleep(self.transcribe_delay)
        if self.transcribe_error is not None:
            err = {"error": {"message": "scripted failure", "type": "server_error"}}
            return web.json_response(err, status=self.transcribe_error)
        if "model" not in form or "file" not in form:
            return web.json_response({"error": {"message": "file and model required"}}, status=400)
        text = self.transcripts.pop(0) if self.transcripts else f"transcript of {form['filename']}"
        return web.json_response({"text": text})

    async def _junk(self, request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        chunk = b"\x17" * 65536
        try:
            while self.junk_sent < self.junk_bytes:
                await resp.write(chunk)
                self.junk_sent += len(chunk)
            await resp.write_eof()
        except (ConnectionError, RuntimeError):
            pass  # the client stopped reading and closed: what a capped reader does
        return resp

    async def _speech(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        body["authorization"] = request.headers.get("Authorization")
        self.speeches.append(body)
        if self.junk_bytes:
            return await self._junk(request)
        if self.speech_error is not None:
            err = {"error": {"message": "scripted failure", "type": "server_error"}}
            return web.json_response(err, status=self.speech_error)
        if not body.get("input") or not body.get("model"):
            return web.json_response({"error": {"message": "input and model required"}}, status=400)
        return web.Response(body=self.speech_audio, content_type=self.speech_type)

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append(body)
        self.authorizations.append(request.headers.get("Authorization"))
        if self.reject_stream_options and "stream_options" in body:
            err = {"error": {"message": "Unrecognized request argument supplied: stream_options"}}
            return web.json_response(err, status=400)
        if self.reject_response_format and "response_format" in body:
            err = {"error": {"message": "response_format type json_schema is not supported"}}
            return web.json_response(err, status=400)
        if self.n_ctx is not None and (n := prompt_tokens(body)) >= self.n_ctx:
            # llama-server refuses before it reads the prompt: no scripted turn is used up.
            self.refused.append(body)
            return web.json_response(too_long(n, self.n_ctx), status=400)
        if self.failing is not None:
            self.failed += 1
            err = {"error": {"message": "outage", "type": "server_error", "code": None}}
            return web.json_response(err, status=self.failing)
        lane = next((lane for lane in self.lanes if lane.matches(body)), None)
        if lane is not None:
            turn = lane.turn(body)
        else:
            turn = self.script.pop(0) if self.script else self.responder(body)
        if isinstance(turn, Error):
            headers = {"retry-after": str(turn.retry_after)} if turn.retry_after else {}
            err = {"error": {"message": turn.message, "type": "server_error", "code": None}}
            return web.json_response(err, status=turn.status, headers=headers)
        if isinstance(turn, KeepAlive):
            return await _keep_alive(request, turn)
        if isinstance(turn, Text) and turn.after is not None:
            await turn.after.wait()
        usage = _usage(body, turn) if self.send_usage else None
        if not body.get("stream"):
            return web.json_response(_completion(body, turn, usage))
        wanted = (body.get("stream_options") or {}).get("include_usage")
        return await _stream(request, body, turn, usage if wanted else None)


def _usage(body: dict[str, Any], turn: Turn) -> dict[str, Any]:
    if isinstance(turn, Text | Calls) and turn.usage is not None:
        return turn.usage
    prompt = len(json.dumps(body.get("messages", []))) // 4 + 1
    out = turn.text if isinstance(turn, Text | Calls) else ""
    if isinstance(turn, Calls):
        out += json.dumps(turn.calls)
    completion = len(out) // 4 + 1
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion}  # fmt: skip


async def _keep_alive(request: web.Request, turn: KeepAlive) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    try:
        while True:  # until the client hangs up
            await resp.write(b": keep-alive\n\n")
            await asyncio.sleep(turn.every)
    except (ConnectionError, asyncio.CancelledError):
        return resp


def _tool_calls(turn: Calls) -> list[dict[str, Any]]:
    out = []
    for name, args in turn.calls:
        raw = args if isinstance(args, str) else json.dumps(args)
        out.append(
            {
                "id": f"call_{uuid.uuid4().hex[:12]}",
                "type": "function",
                "function": {"name": name, "arguments": raw},
            }
        )
    return out


def _completion(body: dict[str, Any], turn: Turn, usage: dict[str, Any] | None) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": None, "refusal": None}
    finish = "stop"
    if isinstance(turn, Text):
        message["content"] = turn.text
        finish = turn.finish
    elif isinstance(turn, Calls):
        message["content"] = turn.text or None
        message["tool_calls"] = _tool_calls(turn)
        finish = "tool_calls"
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:10]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": body.get("model", "fake-model"),
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
        "usage": usage,
    }


async def _stream(
    request: web.Request, body: dict[str, Any], turn: Turn, usage: dict[str, Any] | None
) -> web.StreamResponse:
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    cid, created, model = f"chatcmpl-{uuid.uuid4().hex[:10]}", int(time.time()), body.get("model")

    async def send(delta: dict[str, Any], finish: str | None = None) -> None:
        chunk = {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "system_fingerprint": None,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
        if usage is not None:
            chunk["usage"] = None  # OpenAI: null on every chunk but the last
        await resp.write(f"data: {json.dumps(chunk)}\n\n".encode())

    await send({"role": "assistant", "content": "", "refusal": None})
    if isinstance(turn, Text) and turn.pause:
        await asyncio.sleep(turn.pause)
    if isinstance(turn, Text):
        for i in range(0, len(turn.text), max(1, turn.chunk)):
            if turn.delay:
                await asyncio.sleep(turn.delay)
            await send({"content": turn.text[i : i + turn.chunk]})
        await send({}, turn.finish)
    else:
        assert isinstance(turn, Calls)
        if turn.text:
            await send({"content": turn.text})
        for index, call in enumerate(_tool_calls(turn)):
            raw = call["function"]["arguments"]
            await send(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call["id"],
                            "type": "function",
                            "function": {"name": call["function"]["name"], "arguments": ""},
                        }
                    ]
                }
            )
            for i in range(0, len(raw), 10):
                await send(
                    {"tool_calls": [{"index": index, "function": {"arguments": raw[i : i + 10]}}]}
                )
        await send({}, "tool_calls")
    if usage is not None:
        last = {"id": cid, "object": "chat.completion.chunk", "created": created, "model": model,
                "system_fingerprint": None, "choices": [], "usage": usage}  # fmt: skip
        await resp.write(f"data: {json.dumps(last)}\n\n".encode())
    await resp.write(b"data: [DONE]\n\n")
    await resp.write_eof()
    return resp
