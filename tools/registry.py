"""The registry a request's tools come from: every listed feature's tools (bot/features.py
names them, core tools in the order the model sees them, then extensions), the system
prompt's tool lines, then the listings of tools that come and go (MCP servers' here, the
skills'), and the discovery that shows extensions within a budget.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TextIO

from tools.base import (
    Listing,
    RequestContext,
    RequestTools,
    Tool,
    ToolDeps,
    ToolModule,
    Unavailable,
)
from tools.discovery import service as discovery_service
from tools.discovery.index import EmbedFn
from tools.discovery.repo import UsageStore
from tools.discovery.service import Discovery
from tools.mcp import config as mcp_config
from tools.mcp import manager as mcp_module
from tools.mcp.manager import McpManager
from tools.mcp.settings import MCP_LOG, ExtensionSettings

log = logging.getLogger(__name__)


class Registry:
    def __init__(self, tools: Iterable[Tool[Any]]) -> None:
        self.tools: dict[str, Tool[Any]] = {}
        for tool in tools:
            if tool.name in self.tools:
                raise ValueError(f"two tools named {tool.name!r}")
            self.tools[tool.name] = tool
        # Extension tools (web_fetch): shown while they fit TOOL_TOKEN_BUDGET, else reached
        # through tool_search. `self.tools` are the core tools, always shown.
        self.extensions: dict[str, Tool[Any]] = {}
        # Tools that come and go, each listing kept up to date by what lists it: MCP
        # servers' (extensions too) and the skills' (searched only: tool_search finds them,
        # or a call by the name the system prompt's line, after the tools' own, gives).
        self.listings: list[Listing] = []
        # The configured MCP servers, started with the registry (their listing is above).
        self.mcp: McpManager | None = None
        # Chooses each request's tool set: core always, extensions in budget (None: all).
        self.planner: Discovery | None = None
        # Listed tools the settings leave unusable: not offered; name -> what enables it.
        self.unusable: dict[str, str] = {}
        # What the system prompt says about each offered tool, in the features' order.
        self.prompt: dict[str, str] = {}

    def extension_tools(self) -> dict[str, Tool[Any]]:
        out = dict(self.extensions)
        for listing in self.listings:
            for name, tool in listing.tools.items():
                out.setdefault(name, tool)
        return out

    def searched_only(self) -> set[str]:
        return {name for listing in self.listings if listing.searched for name in listing.tools}

    async def start(self) -> None:
        """Start the MCP servers and load what the planner learned."""
        if self.mcp is not None:
            await self.mcp.start()
        if self.planner is not None:
            await self.planner.start()

    def names(self) -> list[str]:
        return list(self.tools)

    def prompt_lines(self) -> list[str]:
        """One line per offered tool of ours, for the system prompt."""
        return [*self.prompt.values(), *(listing.line for listing in self.listings if listing.line)]

    def for_request(self, ctx: RequestContext, text: str) -> RequestTools:
        if self.planner is not None:
            return self.planner.for_request(ctx, text)
        return RequestTools({**self.extension_tools(), **self.tools})


def build_registry(deps: ToolDeps, modules: tuple[ToolModule, ...]) -> Registry:
    """Every listed tool the settings make usable, then MCP servers and discovery."""
    registry = Registry([])
    for module in modules:
        try:
            tool = module.build(deps)
        except Unavailable as why:
            registry.unusable[module.name] = str(why)
            log.info("tool %s not offered: %s", module.name, why)
            continue
        if tool.name in registry.tools or tool.name in registry.extensions:
            raise ValueError(f"two tools named {tool.name!r}")
        (registry.extensions if module.extension else registry.tools)[tool.name] = tool
        registry.prompt[tool.name] = module.prompt
    install_extensions(registry, deps)
    return registry


def install_extensions(registry: Registry, deps: ToolDeps) -> None:
    s = deps.settings_for(ExtensionSettings)
    configs = mcp_config.load_config(s.mcp_config)
    # Without servers no manager: no log file opened, no MCP SDK imported.
    if configs:
        deps.data_dir.mkdir(parents=True, exist_ok=True)
        errlog = open(deps.data_dir / MCP_LOG, "a", encoding="utf-8")  # closed after the servers
        mcp = McpManager(
            configs,
            mcp_module.CALL_TIMEOUT_S,
            health_interval=mcp_config.HEALTH_INTERVAL_S,
            errlog=errlog,
        )
        registry.mcp = mcp
        registry.listings.append(mcp.listing)
        deps.closers.append(mcp.stop)
        deps.closers.insert(0, _closer(errlog))  # closers run in reverse: after mcp.stop
    usage = UsageStore(deps.session_factory, deps.clock)
    budget = discovery_service.TOOL_TOKEN_BUDGET
    registry.planner = Discovery(registry, usage, budget, memory_embedder(deps))


def _closer(file: TextIO) -> Callable[[], Awaitable[None]]:
    async def close() -> None:
        file.close()

    return close


def memory_embedder(deps: ToolDeps) -> EmbedFn | None:
    """The memory's offline WordLlama embedder, for the vector half of tool_search.

    The tool index lives in memory and is rebuilt when tools change, so it may use
    WordLlama even when memories use a remote embedder (which could not be awaited here).
    """
    from tools.memory.embeddings import WordLlamaEmbedder, wordllama_installed

    if not wordllama_installed():  # the lexical half still works
        log.warning("WordLlama unavailable; tool_search ranks by words only")
        return None
    embedder = deps.memory.embedder if deps.memory is not None else None
    if isinstance(embedder, WordLlamaEmbedder):
        return embedder.embed_sync
    return WordLlamaEmbedder().embed_sync  # loads the shared model on first use
