"""The model relay: how a generation job's OpenCode reaches the model without the API key.

One Unix socket per job (relay_server.py), which forward.js in the job's loopback-only
sandbox reaches; here each request gets the key and goes on to LLM_BASE_URL. Only the chat
completions and models endpoints pass, so the key opens nothing else. The socket is the
job's alone (folder 0700, socket 0600, owned by the job's uid), so no other local account
can spend the key; what passes is held to what the bot itself would ask (its models, its
output cap, the budgets) and metered as the job's user's.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

from tools.chat import Completion, Metering
from tools.code.tree import remove_tree
from tools.model_call import ModelCall
from tools.tls import tls_context

if TYPE_CHECKING:
    from aiohttp import web

log = logging.getLogger(__name__)

SOCKET_NAME = "model.sock"
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
    # A job's folder: its socket's server (relay_server.py open_relay).
    sockets: dict[Path, web.AppRunner] = field(default_factory=dict, init=False)

    def __post_init__(self) -> None:
        self.base_url = self.base_url.rstrip("/")

    async def release(self, folder: Path) -> None:
        """Close the job's socket and whatever still passes through it."""
        runner = self.sockets.pop(folder, None)
        if runner is not None:
            await runner.cleanup()
        remove_tree(folder)

    async def close(self) -> None:
        for folder in list(self.sockets):
            await self.release(folder)
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    def cap(self, body: dict[str, Any]) -> None:
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

    async def send(
        self, method: str, tail: str, headers: dict[str, str], body: dict[str, Any]
    ) -> httpx.Response:
        """The request passed on to LLM_BASE_URL with the key, its answer streamed."""
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=TIMEOUT, verify=tls_context())
        headers = {k: v for k, v in headers.items() if k.lower() not in DROPPED}
        headers["content-type"] = "application/json"
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        upstream = self._client.build_request(
            method, f"{self.base_url}/{tail}", headers=headers, content=json.dumps(body)
        )
        return await self._client.send(upstream, stream=True)

    async def record(self, job: RelayJob, out: Completion, body: dict[str, Any]) -> None:
        assert self.metering is not None
        tools = body.get("tools") if isinstance(body.get("tools"), list) else None
        try:
            await self.metering.record_call(job.call, out, body["messages"], tools)
        except Exception:  # the job's answer is worth more than its usage row
            log.exception("model relay: could not record a call's usage")


def relay_models(default: str, others: Sequence[str]) -> tuple[str, ...]:
    """The models a job may ask for: its own first, then the others the bot offers."""
    return tuple(dict.fromkeys([default, *others]))
