"""Extension tools and their discovery, installed on the registry by build_registry."""

from __future__ import annotations

import logging

from tools.discovery.index import EmbedFn
from tools.discovery.service import Discovery
from tools.discovery.usage import UsageStore
from tools.fetch.policy import Policy
from tools.fetch.tool import build_tool as build_web_fetch
from tools.mcp.config import load_config
from tools.mcp.manager import McpManager
from tools.registry import Registry, ToolDeps

log = logging.getLogger(__name__)


def memory_embedder(deps: ToolDeps) -> EmbedFn | None:
    """The memory's offline WordLlama embedder, for the vector half of tool_search.

    The tool index lives in memory and is rebuilt when tools change, so it may use
    WordLlama even when memories use a remote embedder (which could not be awaited here).
    """
    try:
        from tools.memory.embeddings import WordLlamaEmbedder

        embedder = getattr(getattr(deps, "memory", None), "embedder", None)
        if isinstance(embedder, WordLlamaEmbedder):
            return embedder.embed_sync
        return WordLlamaEmbedder().embed_sync
    except Exception:  # the lexical half still works
        log.warning("WordLlama unavailable; tool_search ranks by words only")
        return None


def install_extensions(registry: Registry, deps: ToolDeps) -> None:
    s = deps.settings
    web_fetch = build_web_fetch(deps.http, Policy(allow_private=s.fetch_private_networks == "on"))
    registry.extensions[web_fetch.name] = web_fetch
    mcp = McpManager(load_config(s.mcp_config), call_timeout=s.mcp_timeout_s)
    registry.sources.append(mcp)
    deps.closers.append(mcp.stop)
    usage = UsageStore(deps.session_factory, deps.clock)
    registry.planner = Discovery(registry, usage, s.tool_token_budget, memory_embedder(deps))


def mcp_manager(registry: Registry) -> McpManager | None:
    return next((s for s in registry.sources if isinstance(s, McpManager)), None)


def discovery(registry: Registry) -> Discovery | None:
    return registry.planner if isinstance(registry.planner, Discovery) else None
