"""Chooses each request's tools: core always, extensions while they fit the budget."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tools.base import RequestContext, Tool, ToolCatalog
from tools.discovery.context_log import ContextLog
from tools.discovery.index import EmbedFn, ToolIndex
from tools.discovery.meta import build_meta
from tools.discovery.request import DiscoveringTools
from tools.discovery.usage import UsageStore
from tools.tokens import count_schema

# Tokens (o200k_base) the tool schemas may take in one model call: the core tools and a few
# extensions (~1.5k) with room to spare, a small share of an 8k local model's context. Past
# it, the extensions are found through tool_search.
TOOL_TOKEN_BUDGET = 3800
# Tokens between tool entries in the JSON array (comma, brackets), per tool.
PER_TOOL_OVERHEAD = 1


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
    meta: bool  # whether tool_search / tool_explain are shown


class Discovery:
    def __init__(
        self,
        registry: ToolCatalog,
        usage: UsageStore,
        budget: int,
        embed: EmbedFn | None = None,
        context_log: ContextLog | None = None,
    ) -> None:
        self.registry = registry
        self.usage = usage
        self.budget = budget
        self.embed = embed
        self.context_log = context_log or ContextLog()
        self._costs: dict[str, tuple[str, int]] = {}
        self._catalog: tuple[tuple[tuple[str, str, int], ...], Catalog] | None = None

    async def start(self) -> None:
        await self.usage.load()

    def _cost_of(self, tool: Tool[Any]) -> int:
        schema = tool.schema()
        key = repr(schema)
        cached = self._costs.get(tool.name)
        if cached is None or cached[0] != key:
            cached = (key, count_schema(schema))
            self._costs[tool.name] = cached
        return cached[1]

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
        return cat

    def plan(self, user_id: int, catalog: Catalog | None = None) -> Plan:
        cat = catalog or self.catalog()
        core_cost = sum(cat.cost(n) for n in cat.core)
        all_ext = list(cat.extensions)
        if core_cost + sum(cat.cost(n) for n in all_ext) <= self.budget:
            return Plan(all_ext, [], False)
        room = self.budget - core_cost - cat.meta_cost
        direct: list[str] = []
        for name in self.usage.favourites(user_id):
            if name in cat.extensions and cat.cost(name) <= room:
                direct.append(name)
                room -= cat.cost(name)
        return Plan(direct, [n for n in all_ext if n not in direct], True)

    def for_request(self, ctx: RequestContext, text: str) -> DiscoveringTools:
        cat = self.catalog()
        plan = self.plan(ctx.user_id, cat)
        req = DiscoveringTools(self, cat, ctx, text, plan.direct, [])
        if plan.meta:
            for tool in build_meta(req):
                req.tools[tool.name] = tool
                req.meta.add(tool.name)
            # Per-tool counts are estimates; drop favourites until the exact payload fits.
            while req.loaded and req.cost() > self.budget:
                name, _ = req.loaded.popitem()
                req.tools.pop(name, None)
        return req
