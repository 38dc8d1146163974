"""A model server that answers with recorded (or documented) streams byte for byte:
tests/fixtures/llm/, named in its README.md."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from aiohttp import web

from bot.llm.client import LLMClient
from tests.conftest import make_settings

FIXTURES = Path(__file__).parent / "fixtures" / "llm"
KEY = "sk-test-secret-key-123456"  # the key make_settings gives the client


def recording(name: str) -> tuple[int, bytes]:
    """(status, body) of a recorded answer: `# status N` first, the body as the server sent
    it, and the proxy's `# elapsed` line (not part of the body) last."""
    raw = (FIXTURES / name).read_bytes()
    head, _, body = raw.partition(b"\n")
    assert head.startswith(b"# status ")
    if body.rstrip(b"\n").rsplit(b"\n", 1)[-1].startswith(b"# elapsed"):
        body = body.rstrip(b"\n").rsplit(b"\n", 1)[0] + b"\n"
    return int(head.split()[-1]), body


class Replay:
    """An HTTP server that answers each chat completion with the next queued recording."""

    def __init__(self) -> None:
        self.queue: list[str] = []
        self.requests: list[dict[str, Any]] = []
        self.runner: web.AppRunner | None = None
        self.port = 0

    async def start(self) -> Replay:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.chat)
        self.runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.port = self.runner.addresses[0][1]
        return self

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    async def chat(self, request: web.Request) -> web.Response:
        self.requests.append(await request.json())
        status, body = recording(self.queue.pop(0))
        streamed = body.startswith((b"data:", b":"))
        kind = "text/event-stream" if streamed else "application/json"
        return web.Response(status=status, body=body, content_type=kind)


@contextlib.asynccontextmanager
async def replaying() -> AsyncIterator[Replay]:
    server = await Replay().start()
    try:
        yield server
    finally:
        assert server.runner is not None
        await server.runner.cleanup()


def client(tmp_path: Path, server: Replay, **extra: Any) -> LLMClient:
    settings = make_settings(tmp_path, server, **extra)  # type: ignore[arg-type]
    return LLMClient(settings, retry_base_delay=0.01, retry_max_delay=0.02)
