"""The real tier's own proxy between Sidekick and llama-server: it passes every byte of
the answer through as it arrives (streams stay streams) and records each exchange.

It changes a chat request in two cases only, and records that it did:
- `max_tokens` when the request has none (CPU inference: short answers keep the tier fast);
- `force_tool(name)`: the next chat request that ends with the user's turn must call that
  tool. Small models do not call tools on their own (the 0.5B model writes its calls out as
  text, and never the `<tool_call>` tag of Qwen2.5's template). So the proxy offers only
  that tool, sets `parallel_tool_calls: false`, and starts the assistant's turn with
  `<tool_call>\n` (llama-server continues a trailing assistant message). What comes back is
  llama.cpp's own tool-call stream, parsed by its own parser. No `tool_choice: "required"`:
  its grammar makes each token take seconds on this CPU. The forced reply is greedy
  (`temperature: 0`): sampled, the 0.5B model sometimes writes a body that is no call
  (`{"name": "store", "action": ...}`, `"arguments": 2}` and a second object), and
  llama-server's parser (xllamacpp 2026.10) answers that with a 500, "does not match the
  expected peg-native format", instead of a reply. Greedy, it writes a well-formed call.
  Prefilling more (`{"name": "memory", "arguments": {`) is no way out: the server then
  streams the arguments without the prefilled brace.
- `greedy = True`: chat requests get `temperature: 0`, so a test that needs the model to
  do one thing does it run after run.
- `without_tools = True`: chat requests go without their tool schemas, for a test of what
  does not depend on them (streaming, usage): offered tools, the 0.5B model sampled writes
  a call out for "Count from 1 to 10" (`{"name": "code", ...}`) in about half the runs.
/v1/embeddings goes to the embedding server when one is given.

`hold(match)` keeps the chat requests `match` picks (a summary call) from the server until
`release()`: what the app does meanwhile shows what waits for them and what does not.
`witness` (the bot fixture sets it: how many calls the fake Telegram has had) is read when
an exchange arrives and before the first byte of its answer goes back to the app, so a test
puts the model's requests and what reached the person in one order, timing nothing.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
from aiohttp import web

from tests.real.servers import free_port


@dataclass
class Exchange:
    path: str
    request: Any  # the JSON body as forwarded
    status: int = 0
    raw: bytes = b""
    changed: list[str] = field(default_factory=list)
    arrived: int = 0  # the proxy's witness when the request arrived
    # ... and just before anything of the answer went back to the app (None: not yet)
    answering: int | None = None
    held: bool = False

    @property
    def events(self) -> list[dict[str, Any]]:
        """The `data:` chunks of a streamed answer."""
        out = []
        for line in self.raw.decode("utf-8", "replace").splitlines():
            if line.startswith("data: {"):
                out.append(json.loads(line[6:]))
        return out

    @property
    def answer(self) -> dict[str, Any]:
        """The final figures: the last chunk with `usage` (streamed) or the JSON answer."""
        if self.raw.lstrip().startswith(b"{"):
            body: dict[str, Any] = json.loads(self.raw)
            return body
        with_usage = [e for e in self.events if "usage" in e]
        return with_usage[-1] if with_usage else {}

    @property
    def timings(self) -> dict[str, Any]:
        t: dict[str, Any] = self.answer.get("timings") or {}
        return t

    def reuse(self) -> float:
        """Share of the prompt llama-server took from its cache (cache_n of all prompt
        tokens; prompt_n counts only the ones it processed)."""
        t = self.timings
        total = t["cache_n"] + t["prompt_n"]
        return float(t["cache_n"]) / total if total else 0.0

    def tool_calls(self) -> list[dict[str, Any]]:
        return [
            tc
            for e in self.events
            for c in e.get("choices") or []
            for tc in (c.get("delta") or {}).get("tool_calls") or []
        ]

    def finish_reason(self) -> str | None:
        for e in reversed(self.events):
            for c in e.get("choices") or []:
                if c.get("finish_reason"):
                    return str(c["finish_reason"])
        return None


class RecordingProxy:
    def __init__(self, chat_url: str, embed_url: str | None = None, max_tokens: int = 96):
        self.chat_url = chat_url
        self.embed_url = embed_url
        self.max_tokens = max_tokens
        self.exchanges: list[Exchange] = []
        self._force: str | None = None
        self.greedy = False
        self.without_tools = False
        self.witness: Callable[[], int] = lambda: 0
        self._hold: Callable[[dict[str, Any]], bool] | None = None
        self._released = asyncio.Event()
        self._runner: web.AppRunner | None = None
        self._client = httpx.AsyncClient(timeout=httpx.Timeout(900.0, connect=10.0))
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}/v1"

    def force_tool(self, name: str) -> None:
        self._force = name

    def hold(self, match: Callable[[dict[str, Any]], bool]) -> None:
        """Keep every chat request `match` picks from the server until release()."""
        self._hold = match
        self._released.clear()

    def release(self) -> None:
        self._hold = None
        self._released.set()

    def held(self) -> list[Exchange]:
        return [x for x in self.exchanges if x.held]

    def chats(self) -> list[Exchange]:
        return [x for x in self.exchanges if x.path.endswith("/chat/completions")]

    def embeddings(self) -> list[Exchange]:
        return [x for x in self.exchanges if x.path.endswith("/embeddings")]

    async def start(self) -> RecordingProxy:
        app = web.Application(client_max_size=64 << 20)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, shutdown_timeout=1.0)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port).start()
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        await self._client.aclose()

    def _rewrite(self, body: dict[str, Any], changed: list[str]) -> None:
        if "max_tokens" not in body and "max_completion_tokens" not in body:
            body["max_tokens"] = self.max_tokens
            changed.append("max_tokens")
        if self.greedy:
            body["temperature"] = 0
            changed.append("greedy")
        if self.without_tools:
            for key in ("tools", "tool_choice", "parallel_tool_calls"):
                body.pop(key, None)
            changed.append("without tools")
        messages = body.get("messages") or []
        if self._force and messages and messages[-1].get("role") == "user":
            name, self._force = self._force, None
            body["tools"] = [t for t in body.get("tools") or [] if t["function"]["name"] == name]
            assert body["tools"], f"Sidekick offered no tool named {name!r}"
            body["parallel_tool_calls"] = False
            body["temperature"] = 0
            body["messages"] = [*messages, {"role": "assistant", "content": "<tool_call>\n"}]
            changed.append(f"forced:{name}")

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        raw = await request.read()
        body = json.loads(raw) if raw else None
        x = Exchange(path=path, request=body, arrived=self.witness())
        self.exchanges.append(x)
        if path.endswith("/chat/completions") and isinstance(body, dict):
            if self._hold is not None and self._hold(body):
                x.held = True
                await self._released.wait()
            self._rewrite(body, x.changed)
        upstream = self.embed_url if path.endswith("/embeddings") and self.embed_url else None
        url = (upstream or self.chat_url) + path
        headers = {"Content-Type": "application/json"}
        content = json.dumps(body).encode() if body is not None else None
        req = self._client.build_request(request.method, url, content=content, headers=headers)
        upstream_response = await self._client.send(req, stream=True)
        try:
            x.status = upstream_response.status_code
            x.answering = self.witness()
            out = web.StreamResponse(status=x.status)
            kind = upstream_response.headers.get("content-type", "").split(";")[0]
            out.content_type = kind or "application/octet-stream"
            await out.prepare(request)
            async for chunk in upstream_response.aiter_raw():
                x.raw += chunk
                await out.write(chunk)
            await out.write_eof()
            return out
        finally:
            await upstream_response.aclose()
