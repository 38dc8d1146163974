"""The tools a request gets: the registry of every listed feature's tools (bot/features.py
names them, core tools in the order the model sees them, then extensions), the system
prompt's tool lines and the listings of tools that come and go (MCP servers' here, the
skills'); and the planner (Discovery) that picks each request's set from it: core always,
extensions while they fit the budget, the rest reached through tool_search / tool_explain,
which load an explained tool into the request's set (unloading older ones to stay in
budget) and record each successful call so a user's favourites are shown directly next
time. The registry and its planner are one thing: every request's tools come from the
planner, which reads nothing but the registry; the discovery feature (tools/discovery/)
adds /tools and the learning of favourites.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any, TextIO

from pydantic import BaseModel, Field

from tools.base import (
    FromOutside,
    Listing,
    RequestContext,
    RequestTools,
    Tool,
    ToolCall,
    ToolDeps,
    ToolError,
    ToolModule,
    ToolOutput,
    Unavailable,
)
from tools.discovery.index import EmbedFn, ToolIndex
from tools.discovery.repo import USED, UsageStore
from tools.mcp import config as mcp_config
from tools.mcp import manager as mcp_module
from tools.mcp.manager import McpManager
from tools.mcp.settings import MCP_LOG, ExtensionSettings
from tools.tokens import count_payload, count_schema

log = logging.getLogger(__name__)

# Tokens (o200k_base) the tool schemas may take in one model call: the core tools and a few
# extensions (~1.5k) with room to spare, a small share of an 8k local model's context. Past
# it, the extensions are found through tool_search.
TOOL_TOKEN_BUDGET = 3800
# Tokens between tool entries in the JSON array (comma, brackets), per tool.
PER_TOOL_OVERHEAD = 1
PLANS_KEPT = 10_000  # users whose plan is kept (a bound: every user is one row)


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
        """Extensions never shown directly, only found through tool_search (skills: the
        system prompt names them in one line)."""
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
    registry.planner = Discovery(registry, usage, TOOL_TOKEN_BUDGET, offline_embedder())


def _closer(file: TextIO) -> Callable[[], Awaitable[None]]:
    async def close() -> None:
        file.close()

    return close


def offline_embedder() -> EmbedFn | None:
    """The offline WordLlama embedder, for the vector half of tool_search (its model is
    loaded once per process, and shared with memory's when that uses it too).

    The tool index lives in memory and is rebuilt when tools change, so it may use
    WordLlama even when memories use a remote embedder (which could not be awaited here).
    """
    from tools.memory.embeddings import WordLlamaEmbedder, wordllama_installed

    if not wordllama_installed():  # the lexical half still works
        log.warning("WordLlama unavailable; tool_search ranks by words only")
        return None
    return WordLlamaEmbedder().embed_sync  # loads the shared model on first use


# The planner: each request's tools, chosen from the registry within the budget.


@dataclass
class Catalog:
    """Every tool at one moment: core, extension, their costs and the search index."""

    core: dict[str, Tool[Any]]
    extensions: dict[str, Tool[Any]]
    costs: dict[str, int]
    index: ToolIndex
    meta_cost: int

    def cost(self, name: str) -> int:
        return self.costs.get(name, 0) + PER_TOOL_OVERHEAD


@dataclass
class Plan:
    direct: list[str]  # extension tools shown directly
    discoverable: list[str]  # extension tools reached through tool_search
    # Whether tool_search / tool_explain are shown on every request; else only on one whose
    # words meet a searched-only tool (a skill).
    meta: bool


class Discovery:
    def __init__(
        self,
        registry: Registry,
        usage: UsageStore,
        budget: int,
        embed: EmbedFn | None = None,
    ) -> None:
        self.registry = registry
        self.usage = usage
        self.budget = budget
        self.embed = embed
        self._costs: dict[str, tuple[str, int]] = {}
        self._catalog: tuple[tuple[tuple[str, str, int], ...], Catalog] | None = None
        # Each user's plan for the catalog of the moment: made again when the catalog
        # changes or the user's favourites do (learned), not on every message.
        self._plans: dict[int, Plan] = {}

    async def start(self) -> None:
        await self.usage.load()
        self._plans.clear()

    def learned(self, user_id: int, used: list[tuple[str, str]]) -> list[dict[str, Any]]:
        """The tool_usage rows of these calls (UsageStore.rows); the user's next request
        plans with them."""
        self._plans.pop(user_id, None)
        return self.usage.rows(user_id, used)

    def _cost_of(self, tool: Tool[Any]) -> int:
        schema = tool.schema()
        key = repr(schema)
        cached = self._costs.get(tool.name)
        if cached is None or cached[0] != key:
            cached = (key, count_schema(schema))
            self._costs[tool.name] = cached
        return cached[1]

    def schemas(self) -> list[dict[str, Any]]:
        """Every schema a catalog counts: the tools' and the meta tools'."""
        probe = DiscoveringTools.__new__(DiscoveringTools)  # meta schemas only, never run
        tools = [*self.registry.tools.values(), *self.registry.extension_tools().values()]
        return [t.schema() for t in [*tools, *build_meta(probe)]]

    def catalog(self) -> Catalog:
        core = dict(self.registry.tools)
        ext = {n: t for n, t in self.registry.extension_tools().items() if n not in core}
        # Tool objects are rebuilt when a server re-lists its tools, so identity marks change.
        key = tuple((n, t.description, id(t)) for n, t in ext.items())
        if self._catalog is not None and self._catalog[0] == key:
            cat = self._catalog[1]
            cat.core = core
            return cat
        costs = {t.name: self._cost_of(t) for t in [*core.values(), *ext.values()]}
        index = ToolIndex([(n, t.description) for n, t in ext.items()], self.embed)
        probe = DiscoveringTools.__new__(DiscoveringTools)  # meta schemas only, never run
        meta_cost = sum(count_schema(t.schema()) + PER_TOOL_OVERHEAD for t in build_meta(probe))
        cat = Catalog(core, ext, costs, index, meta_cost)
        self._catalog = (key, cat)
        self._plans.clear()
        return cat

    def plan(self, user_id: int, catalog: Catalog | None = None) -> Plan:
        cat = catalog or self.catalog()
        core_cost = sum(cat.cost(n) for n in cat.core)
        all_ext = list(cat.extensions)
        searched = self.registry.searched_only()
        shown = [n for n in all_ext if n not in searched]
        if core_cost + sum(cat.cost(n) for n in shown) <= self.budget:
            # Everything but the searched-only tools (skills) fits: tool_search joins only a
            # request whose words meet one of them (for_request), so an installed skill
            # costs an empty chat its catalogue entry and no schema. Room for the search
            # tools is kept, favourites fill what is left.
            direct = list(shown)
            room = self.budget - core_cost - sum(cat.cost(n) for n in shown)
            if searched:
                room -= cat.meta_cost
            return self._favourites(user_id, cat, direct, room, meta=False)
        room = self.budget - core_cost - cat.meta_cost
        return self._favourites(user_id, cat, [], room, meta=True)

    def _favourites(
        self, user_id: int, cat: Catalog, direct: list[str], room: int, meta: bool
    ) -> Plan:
        # What a user calls often is shown directly, a skill too (usage teaches the ranking).
        for name in self.usage.favourites(user_id):
            if name in direct:
                continue
            if name in cat.extensions and cat.cost(name) <= room:
                direct.append(name)
                room -= cat.cost(name)
        return Plan(direct, [n for n in cat.extensions if n not in direct], meta)

    def for_request(self, ctx: RequestContext, text: str) -> DiscoveringTools:
        cat = self.catalog()
        plan = self._plans.get(ctx.user_id)
        if plan is None:
            if len(self._plans) >= PLANS_KEPT:
                self._plans.clear()
            plan = self._plans[ctx.user_id] = self.plan(ctx.user_id, cat)
        req = DiscoveringTools(self, cat, text, plan.direct)
        if plan.meta or (plan.discoverable and cat.index.mentions(text, set(plan.discoverable))):
            for tool in build_meta(req):
                req.tools[tool.name] = tool
                req.meta.add(tool.name)
            # Per-tool counts are estimates; drop favourites until the exact payload fits.
            while req.loaded and req.cost() > self.budget:
                name, _ = req.loaded.popitem()
                req.tools.pop(name, None)
        return req


class DiscoveringTools(RequestTools):
    """Per request: which schemas the model sees; grows as tools are explained."""

    def __init__(
        self, discovery: Discovery, catalog: Catalog, text: str, direct: list[str]
    ) -> None:
        super().__init__({**catalog.core, **{n: catalog.extensions[n] for n in direct}})
        self.discovery = discovery
        self.catalog = catalog
        self.text = text
        self.meta: set[str] = set()  # tool_search and tool_explain, when offered
        # Extension tools that may be unloaded to make room, oldest first.
        self.loaded: OrderedDict[str, None] = OrderedDict((n, None) for n in direct)

    # -- what the model sees -------------------------------------------------------------

    def cost(self, extra: str | None = None) -> int:
        """Exact tokens of the payload, with `extra` added (token merges at the joins make
        the sum of per-tool counts drift, so the whole array is counted)."""
        tools = [*self.tools.values()]
        if extra is not None:
            tools.append(self.catalog.extensions[extra])
        return count_payload([t.schema() for t in tools])

    def load(self, name: str) -> bool:
        """Show an extension tool from the next call on, unloading older ones to stay in budget.

        Returns False when the tool is already shown.
        """
        if name in self.tools:
            return False
        budget = self.discovery.budget
        while self.loaded and self.cost(name) > budget:
            old, _ = self.loaded.popitem(last=False)
            self.tools.pop(old, None)
        if self.cost(name) > budget:
            log.warning("tool %s alone exceeds TOOL_TOKEN_BUDGET; shown anyway", name)
        self.tools[name] = self.catalog.extensions[name]
        self.loaded[name] = None
        return True

    # -- resolving calls -----------------------------------------------------------------

    def get(self, name: str) -> Tool[Any] | None:
        tool = self.tools.get(name)
        if (
            tool is None
            and name in self.catalog.extensions
            and name in self.discovery.registry.searched_only()
        ):
            # A skill called by the name the system prompt's catalogue gives it: loaded as
            # tool_explain would load it (its schema joins the next call), then run.
            self.load(name)
            tool = self.tools.get(name)
        if tool is None or name in self.meta:
            return tool
        return self._recording(tool)

    def unknown(self, name: str) -> str:
        if name in self.catalog.extensions:
            return (
                f"tool {name!r} is not loaded for this request; call tool_explain with "
                f'{{"name": "{name}"}} to load it, then call it again'
            )
        if self.meta:
            return (
                f"unknown tool {name!r}; call tool_search with a short description of what "
                "you need to find the right tool"
            )
        return super().unknown(name)

    def _recording(self, tool: Tool[Any]) -> Tool[Any]:
        text = self.text

        async def run(params: Any, call: ToolCall) -> ToolOutput | FromOutside:
            out = await tool.run(params, call)  # an exception means no success to learn from
            call.ctx.state(USED).append((tool.name, text))
            return out

        return dataclasses.replace(tool, run=run)


# tool_search and tool_explain: how the model reaches tools it is not shown.


class SearchParams(BaseModel):
    query: str = Field(description="What you need to do, in a few words", min_length=1)
    limit: int = Field(default=5, ge=1, le=10)


class ExplainParams(BaseModel):
    name: str = Field(description="A tool name from tool_search", min_length=1)


def summary(description: str, limit: int = 140) -> str:
    """The first sentence of a description, cut to one short line."""
    text = " ".join(description.split())
    first = re.split(r"(?<=[.!?])\s", text, maxsplit=1)[0]
    return first if len(first) <= limit else first[: limit - 1].rstrip() + "…"


def build_meta(req: DiscoveringTools) -> list[Tool[Any]]:
    async def tool_search(p: SearchParams, call: ToolCall) -> dict[str, Any]:
        catalog = req.catalog
        found = [
            {
                "name": name,
                "summary": summary(catalog.extensions[name].description),
                **({"loaded": True} if name in req.tools else {}),
            }
            for name in catalog.index.search(p.query, p.limit)
        ]
        if not found:
            return {"tools": [], "note": "no tool matches; try other words"}
        return {"tools": found, "next": "call tool_explain with one name to load it"}

    async def tool_explain(p: ExplainParams, call: ToolCall) -> dict[str, Any]:
        catalog = req.catalog
        name = p.name.strip()
        tool = catalog.extensions.get(name) or catalog.core.get(name)
        if tool is None:
            close = catalog.index.search(name, 3)
            hint = f"; did you mean: {', '.join(close)}" if close else ""
            raise ToolError(f"no tool named {name!r}{hint}. Use tool_search to find tools.")
        if name in catalog.extensions:
            req.load(name)
        return {
            "name": tool.name,
            "description": tool.description,
            # schema() rather than the params model: MCP tools carry their own JSON schema.
            "parameters": tool.schema()["function"]["parameters"],
            "note": f"{name} is loaded: call it directly now",
        }

    return [
        Tool(
            "tool_search",
            "Find more tools (MCP servers, web_fetch, ...) for a need described in a few words. "
            "Returns tool names with one-line summaries; then call tool_explain.",
            SearchParams,
            tool_search,
        ),
        Tool(
            "tool_explain",
            "Load one tool by name: returns its full schema and makes it callable from now on.",
            ExplainParams,
            tool_explain,
        ),
    ]
