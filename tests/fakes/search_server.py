"""A fake SearXNG / Brave Search server on 127.0.0.1 serving fixture bodies on demand.

Each path answers from its script (one reply per request, in order), then from its
default. `requests` records (path, query params, headers) so tests can check what was sent.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "search"


def fixture(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))


@dataclass
class Reply:
    body: Any = None  # dict/list → JSON; str → text/html
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    hang: bool = False  # never answer (until the server stops): for client timeouts


@dataclass
class Seen:
    path: str
    params: dict[str, str]
    headers: dict[str, str]


class FakeSearch:
    def __init__(self) -> None:
        self.defaults: dict[str, Reply] = {}
        self.scripts: dict[str, list[Reply]] = {}
        self.requests: list[Seen] = []
        self.port = 0
        self._runner: web.AppRunner | None = None
        self._release = asyncio.Event()

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def serve(self, path: str, reply: Reply) -> None:
        self.defaults[path] = reply

    def add(self, path: str, *replies: Reply) -> None:
        self.scripts.setdefault(path, []).extend(replies)

    def count(self, path: str) -> int:
        return sum(1 for r in self.requests if r.path == path)

    async def start(self) -> FakeSearch:
        app = web.Application()
        app.router.add_route("GET", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def stop(self) -> None:
        self._release.set()
        if self._runner is not None:
            await self._runner.cleanup()

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        path = request.path
        self.requests.append(Seen(path, dict(request.query), dict(request.headers)))
        script = self.scripts.get(path)
        reply = script.pop(0) if script else self.defaults.get(path)
        if reply is None:
            return web.json_response({"error": "not found"}, status=404)
        if reply.hang:
            await self._release.wait()
        if isinstance(reply.body, str):
            return web.Response(
                text=reply.body,
                status=reply.status,
                headers=reply.headers,
                content_type="text/html",
            )
        return web.json_response(reply.body, status=reply.status, headers=reply.headers)
