"""The model relay: how a generation job's OpenCode reaches the model without the API key.

An HTTP server on a Unix socket in the bot process. The job's sandbox has a network
namespace of its own holding only loopback; forward.js, in there, passes connections to
127.0.0.1:<port> on to this socket (bound into the sandbox), and OpenCode's config names
that endpoint with no key. Here each request gets the Authorization header and goes on to
LLM_BASE_URL; the answer (a stream of events, usually) comes back as it arrives. Only the
chat completions and models endpoints are relayed, so the key opens nothing else.

The socket's folder is 0711 and the socket's name random: other local accounts cannot
list the folder to find it (a throwaway uid in a sandbox gets the folder bound in).
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import tempfile
from pathlib import Path

import httpx
from aiohttp import web

from tools.code.tree import remove_tree

log = logging.getLogger(__name__)

RELAYED = {("POST", "chat/completions"), ("GET", "models")}
BODY_LIMIT = 32 * 1024 * 1024
# A hop-by-hop or framing header is not passed on: both sides frame their own messages.
DROPPED = {"authorization", "host", "content-length", "transfer-encoding", "connection"}
KEPT_RESPONSE = ("content-type", "retry-after")


class ModelRelay:
    def __init__(self, base_url: str, api_key: str | None, timeout_s: float = 600.0) -> None:
        self.base_url = base_url.rstrip("/")
        self._key = api_key
        self._timeout = httpx.Timeout(timeout_s, connect=15.0)
        self.folder: Path | None = None
        self.socket_name = ""
        self._runner: web.AppRunner | None = None
        self._client: httpx.AsyncClient | None = None
        self._lock = asyncio.Lock()

    async def start(self) -> Path:
        """The socket's folder (bound into each job's sandbox), started on first use."""
        async with self._lock:
            if self._runner is None or self.folder is None:
                folder = Path(tempfile.mkdtemp(prefix="sidekick-model-"))
                os.chmod(folder, 0o711)
                name = f"model-{secrets.token_hex(12)}.sock"
                app = web.Application(client_max_size=BODY_LIMIT)
                app.router.add_route("*", "/{tail:.*}", self._handle)
                runner = web.AppRunner(app, access_log=None)
                await runner.setup()
                await web.UnixSite(runner, str(folder / name)).start()
                os.chmod(folder / name, 0o666)
                self._client = httpx.AsyncClient(timeout=self._timeout)
                self._runner, self.folder, self.socket_name = runner, folder, name
            return self.folder

    @property
    def socket(self) -> Path:
        assert self.folder is not None, "start() first"
        return self.folder / self.socket_name

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._client is not None:
            await self._client.aclose()
            self._client = None
        if self.folder is not None:
            remove_tree(self.folder)
            self.folder = None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        # OpenCode's base URL is http://127.0.0.1:<port>/v1: the path after /v1 is the
        # endpoint, appended to LLM_BASE_URL (which ends in its own /v1, or whatever it has).
        tail = request.match_info["tail"].removeprefix("v1/").strip("/")
        if (request.method, tail) not in RELAYED:
            return web.json_response(
                {"error": {"message": f"the model relay passes on only {sorted(RELAYED)}"}},
                status=404,
            )
        assert self._client is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in DROPPED}
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        body = await request.read()
        upstream = self._client.build_request(
            request.method, f"{self.base_url}/{tail}", headers=headers, content=body or None
        )
        try:
            answer = await self._client.send(upstream, stream=True)
        except httpx.HTTPError as exc:
            log.warning("model relay: %s failed: %s", tail, type(exc).__name__)
            return web.json_response(
                {"error": {"message": f"the model endpoint is unreachable ({type(exc).__name__})"}},
                status=502,
            )
        try:
            resp = web.StreamResponse(status=answer.status_code)
            for name in KEPT_RESPONSE:
                if name in answer.headers:
                    resp.headers[name] = answer.headers[name]
            await resp.prepare(request)
            async for chunk in answer.aiter_bytes():
                await resp.write(chunk)
            await resp.write_eof()
            return resp
        except (ConnectionError, httpx.HTTPError) as exc:
            # The job ended mid-answer (killed, aborted), or the endpoint broke off.
            log.info("model relay: %s cut short: %s", tail, type(exc).__name__)
            return resp
        finally:
            await answer.aclose()
