"""tool_search and tool_explain: how the model reaches tools it is not shown."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field

from tools.base import Tool, ToolCall, ToolError

if TYPE_CHECKING:
    from tools.discovery.request import DiscoveringTools


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
        hits = catalog.index.search(p.query, p.limit)
        found = [
            {
                "name": h.name,
                "summary": summary(catalog.extensions[h.name].description),
                **({"loaded": True} if h.name in req.tools else {}),
            }
            for h in hits
        ]
        if not found:
            return {"tools": [], "note": "no tool matches; try other words"}
        return {"tools": found, "next": "call tool_explain with one name to load it"}

    async def tool_explain(p: ExplainParams, call: ToolCall) -> dict[str, Any]:
        catalog = req.catalog
        name = p.name.strip()
        tool = catalog.extensions.get(name) or catalog.core.get(name)
        if tool is None:
            close = [h.name for h in catalog.index.search(name, 3)]
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
