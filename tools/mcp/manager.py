"""Every configured MCP server: started with the bot, their tools published in one listing
that a server rewrites when it lists its tools (at each start, and when a health probe finds
the list changed); the registry reads it as it stands (tools/base.py Listing)."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TextIO

from tools.base import Listing, Tool
from tools.mcp.config import HEALTH_INTERVAL_S, ServerConfig

if TYPE_CHECKING:
    from tools.mcp.server import McpServer

log = logging.getLogger(__name__)


@dataclass
class ServerStatus:
    name: str
    up: bool
    tools: int
    error: str | None


# One MCP tool call's limit before it becomes an error result: a slow API behind a server,
# not a stuck server, which the health probe restarts.
CALL_TIMEOUT_S = 60.0


class McpManager:
    def __init__(
        self,
        configs: list[ServerConfig],
        call_timeout: float,
        start_wait: float = 15.0,
        health_interval: float = HEALTH_INTERVAL_S,
        errlog: TextIO | None = None,
    ) -> None:
        self.servers: list[McpServer] = []
        self.listing = Listing(searched=False)
        if configs:  # the MCP SDK is slow and large to import: only when used
            from tools.mcp.server import McpServer, quiet_sdk_parse_errors

            self.servers = [
                McpServer(c, call_timeout, self._publish, health_interval, errlog) for c in configs
            ]
            quiet_sdk_parse_errors()
        self.start_wait = start_wait

    async def start(self) -> None:
        """Launch every server and wait (bounded) for the first tool listing of each."""
        for server in self.servers:
            server.start()
        if not self.servers:
            return
        waits = [asyncio.wait_for(s.settled.wait(), self.start_wait) for s in self.servers]
        results = await asyncio.gather(*waits, return_exceptions=True)
        for server, res in zip(self.servers, results, strict=True):
            if isinstance(res, BaseException) or not server.up:
                if server.last_error is None:  # still starting: say so, not "not running"
                    server.last_error = (
                        f"no tool list within {self.start_wait:g} s; still starting "
                        "(slow first start, e.g. npx downloading?)"
                    )
                log.warning("MCP server %s not up at start: %s", server.name, server.last_error)

    async def stop(self) -> None:
        await asyncio.gather(*(s.stop() for s in self.servers), return_exceptions=True)

    def _publish(self) -> None:
        """The listing from every server that listed its tools once (a restarting server
        keeps its list: its calls wait for it, then fail with a clear error)."""
        tools: dict[str, Tool[Any]] = {}
        for server in self.servers:
            for tool in server.our_tools:
                tools.setdefault(tool.name, tool)
        self.listing.tools = tools

    def status(self) -> list[ServerStatus]:
        return [ServerStatus(s.name, s.up, len(s.our_tools), s.last_error) for s in self.servers]
