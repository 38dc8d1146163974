"""One request's tool set: core tools, the extension tools that fit, and what gets explained."""

from __future__ import annotations

import dataclasses
import logging
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from tools.base import RequestContext, RequestTools, Tool, ToolCall, ToolOutput
from tools.tokens import count_payload

if TYPE_CHECKING:
    from tools.discovery.service import Catalog, Discovery

log = logging.getLogger(__name__)


class DiscoveringTools(RequestTools):
    """Per request: which schemas the model sees; grows as tools are explained."""

    def __init__(
        self,
        discovery: Discovery,
        catalog: Catalog,
        ctx: RequestContext,
        text: str,
        direct: list[str],
        meta: list[Tool[Any]],
    ) -> None:
        shown: dict[str, Tool[Any]] = dict(catalog.core)
        shown.update({t.name: t for t in meta})
        shown.update({n: catalog.extensions[n] for n in direct})
        super().__init__(shown)
        self.discovery = discovery
        self.catalog = catalog
        self.ctx = ctx
        self.text = text
        self.meta = {t.name for t in meta}
        # Extension tools that may be unloaded to make room, oldest first.
        self.loaded: OrderedDict[str, None] = OrderedDict((n, None) for n in direct)

    # -- what the model sees -------------------------------------------------------------

    def schemas(self) -> list[dict[str, Any]]:
        return [t.schema() for t in self.tools.values()]

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
        usage, ctx, text = self.discovery.usage, self.ctx, self.text

        async def run(params: Any, call: ToolCall) -> ToolOutput:
            out = await tool.run(params, call)  # an exception means no success to learn from
            await usage.record(ctx.user_id, tool.name, text)
            return out

        return dataclasses.replace(tool, run=run)
