"""One MCP server connection, supervised: the SDK's Client (an anyio context manager) is
entered and left by one long-lived task, and request tasks only call through it. A dead
server is restarted with backoff; calls meanwhile wait up to their own timeout.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any, TextIO

import anyio
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.caching import CacheMode
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tools.base import Tool, ToolError
from tools.mcp.config import HEALTH_INTERVAL_S, HttpServer, ServerConfig, StdioServer
from tools.mcp.convert import McpArgs, build_tool

log = logging.getLogger(__name__)

MAX_BACKOFF_S = 30.0
MAX_TOOL_PAGES = 20


@dataclass(eq=False)
class McpServer:
    config: ServerConfig
    call_timeout: float
    on_tools: Callable[[], None]  # told when our_tools changed: the manager republishes them
    health_interval: float = HEALTH_INTERVAL_S
    errlog: TextIO | None = None  # where a stdio server's stderr goes (None: ours)
    client: Client | None = field(default=None, init=False)
    remote_tools: list[types.Tool] = field(default_factory=list, init=False)
    our_tools: list[Tool[McpArgs]] = field(default_factory=list, init=False)
    ready: asyncio.Event = field(default_factory=asyncio.Event, init=False)
    settled: asyncio.Event = field(default_factory=asyncio.Event, init=False)  # first start tried
    restart: asyncio.Event = field(default_factory=asyncio.Event, init=False)
    stopping: bool = field(default=False, init=False)
    starts: int = field(default=0, init=False)
    last_error: str | None = field(default=None, init=False)
    task: asyncio.Task[None] | None = field(default=None, init=False)

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def up(self) -> bool:
        return self.ready.is_set()

    def start(self) -> None:
        if self.task is None:
            self.task = asyncio.create_task(self._supervise(), name=f"mcp:{self.name}")

    async def stop(self) -> None:
        self.stopping = True
        self.restart.set()
        if self.task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self.task), 10)
            except (TimeoutError, Exception):
                self.task.cancel()
                with contextlib.suppress(BaseException):
                    await self.task

    def _target(self) -> Any:
        cfg = self.config
        if isinstance(cfg, StdioServer):
            # Only the configured env (the SDK adds PATH, HOME, USER, SHELL, TERM, LOGNAME):
            # the bot's own secrets never reach a server process.
            params = StdioServerParameters(command=cfg.command, args=cfg.args, env=dict(cfg.env))
            transport = stdio_client(params, errlog=self.errlog or sys.stderr)
        else:
            assert isinstance(cfg, HttpServer)
            transport = _http_transport(cfg.url, dict(cfg.headers))
        return _watched(transport, self.name, self._mark_dead)

    def _adopt(self, listed: list[types.Tool]) -> None:
        self.remote_tools = listed
        self.our_tools = [build_tool(self.name, t, self.call) for t in listed]
        self.on_tools()

    async def _list_tools(self, client: Client, cache: CacheMode = "use") -> list[types.Tool]:
        tools: list[types.Tool] = []
        cursor: str | None = None
        for _ in range(MAX_TOOL_PAGES):
            page = await client.list_tools(cursor=cursor, cache_mode=cache)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        return tools

    async def _supervise(self) -> None:
        backoff = 0.5
        while not self.stopping:
            self.starts += 1
            connected = False
            try:
                async with Client(self._target(), read_timeout_seconds=self.call_timeout) as client:
                    listed = await asyncio.wait_for(self._list_tools(client), self.call_timeout)
                    self._adopt(listed)
                    self.client = client
                    if self.starts > 1:
                        log.warning("MCP server %s is up again (start %d)", self.name, self.starts)
                    self.last_error = None
                    self.ready.set()
                    self.settled.set()
                    connected = True
                    backoff = 0.5
                    await self._watch(client)
            except Exception as exc:
                error = describe(exc)
                # A server that stays down is retried every 30 s: warn once per new error.
                level = logging.DEBUG if error == self.last_error else logging.WARNING
                self.last_error = error
                log.log(level, "MCP server %s failed: %s", self.name, error)
            finally:
                self.settled.set()
                self.ready.clear()
                self.client = None
                self.restart.clear()
            if self.stopping:
                break
            if connected:
                log.warning(
                    "MCP server %s stopped (%s); restarting in %.1f s",
                    self.name,
                    self.last_error or "connection closed",
                    backoff,
                )
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_S)

    async def _watch(self, client: Client) -> None:
        """Return when the server must be restarted (or the bot stops)."""
        while not self.stopping:
            try:
                await asyncio.wait_for(self.restart.wait(), self.health_interval)
                return
            except TimeoutError:
                pass
            try:
                # A tool listing is the health probe (ping is gone as of 2026-07-28); it
                # also picks up tools the server added or removed since the last one.
                listed = await asyncio.wait_for(
                    self._list_tools(client, "bypass"), min(10.0, self.call_timeout)
                )
            except Exception as exc:
                self.last_error = f"health check failed: {type(exc).__name__}"
                return
            if [t.name for t in listed] != [t.name for t in self.remote_tools]:
                self._adopt(listed)

    async def call(self, remote: str, args: dict[str, Any]) -> types.CallToolResult:
        t = self.call_timeout
        try:
            async with asyncio.timeout(t):
                await self.ready.wait()
                client = self.client
                if client is None:
                    raise ConnectionError("not connected")
                return await client.call_tool(remote, args, read_timeout_seconds=t)
        except (TimeoutError, MCPError) as exc:
            said = str(exc).lower()
            if isinstance(exc, TimeoutError) or "timed out" in said or "timeout" in said:
                raise ToolError(
                    f"MCP server {self.name} did not answer within {t:g} s; "
                    "try again later or another way"
                ) from None
            if any(w in said for w in ("closed", "connection", "terminated", "parse")):
                raise self._dead() from None
            raise ToolError(f"MCP server {self.name}: {exc}"[:500]) from None
        except (ConnectionError, OSError, EOFError, RuntimeError, ValueError) as exc:
            log.warning("MCP call %s/%s failed: %r", self.name, remote, exc)
            raise self._dead() from None
        except Exception as exc:
            if type(exc).__name__ in {"ClosedResourceError", "BrokenResourceError", "EndOfStream"}:
                raise self._dead() from None
            if isinstance(exc, ExceptionGroup):
                raise ToolError(f"MCP server {self.name}: {describe(exc)}") from None
            raise

    def _mark_dead(self) -> None:
        # Calls from now on wait for the restarted connection instead of the dead one.
        if self.ready.is_set() and not self.stopping:
            self.last_error = "the connection closed (the server exited or crashed)"
        self.ready.clear()
        self.client = None
        self.restart.set()

    def _dead(self) -> ToolError:
        self._mark_dead()
        return ToolError(
            f"MCP server {self.name} stopped answering (it crashed or sent garbage); "
            "it is being restarted, try the call again in a moment"
        )


# The SDK's own defaults for its transports.
HTTP_TIMEOUT_S = 30.0
HTTP_READ_TIMEOUT_S = 300.0


@contextlib.asynccontextmanager
async def _http_transport(url: str, headers: dict[str, str]) -> AsyncIterator[Any]:
    # Headers go on a client of our own, as `streamable_http_client` documents (httpx2 is
    # the client type of the SDK's public signature); the SDK leaves a client it was given
    # open, so this one is closed here with it. A server may hold a stream open: long reads.
    timeout = httpx2.Timeout(HTTP_TIMEOUT_S, read=HTTP_READ_TIMEOUT_S)
    async with (
        httpx2.AsyncClient(headers=headers or None, timeout=timeout) as http,
        streamable_http_client(url, http_client=http) as streams,
    ):
        yield streams


def describe(exc: BaseException) -> str:
    """The real cause, not the task group around it: `ExceptionGroup: unhandled errors in a
    TaskGroup` says nothing; the first error inside it does."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        inner = [e for e in exc.exceptions if not isinstance(e, asyncio.CancelledError)]
        exc = (inner or list(exc.exceptions))[0]
    text = str(exc) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:300]


@contextlib.asynccontextmanager
async def _watched(
    transport: Any, name: str, closed: Callable[[], None]
) -> AsyncIterator[tuple[Any, Any]]:
    """The transport's streams, with the read side passed through a task that (1) calls
    `closed` the moment the server's stream ends, so a dead server shows as down at once
    rather than at the next health check, and (2) drops lines that are not JSON-RPC (a server
    printing to stdout), logging that once per connection instead of a traceback per line."""
    async with transport as (read, write):
        send, receive = anyio.create_memory_object_stream[Any](0)

        async def forward() -> None:
            warned = False
            try:
                async with send:
                    async for item in read:
                        if isinstance(item, Exception):
                            if not warned:
                                warned = True
                                log.warning(
                                    "MCP server %s printed text that is not MCP on its stdout "
                                    "(ignored; servers must log to stderr): %s",
                                    name,
                                    _sample(item),
                                )
                            continue
                        await send.send(item)
            except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
                pass
            finally:
                closed()

        async with anyio.create_task_group() as tg:
            tg.start_soon(forward)
            try:
                yield receive, write
            finally:
                tg.cancel_scope.cancel()


def _sample(exc: Exception) -> str:
    # The SDK's parse error is a pydantic error; the offending text is its input_value.
    found = re.search(r"input_value=(.{1,120}?), input_type", str(exc))
    return found.group(1) if found else type(exc).__name__


class _QuietParseErrors(logging.Filter):
    """The SDK logs a traceback for every non-JSON line a server prints; _watched says it once."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Failed to parse JSONRPC message")


def quiet_sdk_parse_errors() -> None:
    logger = logging.getLogger("mcp.client.stdio")
    if not any(isinstance(f, _QuietParseErrors) for f in logger.filters):
        logger.addFilter(_QuietParseErrors())
