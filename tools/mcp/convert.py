"""An MCP tool as one of ours: `server__tool`, its own JSON schema, results as text."""

from __future__ import annotations

import copy
import re
from collections.abc import Awaitable, Callable
from typing import Any

import mcp_types as types
from pydantic import BaseModel, ConfigDict

from tools.base import Tool, ToolCall, ToolError, ToolOutput, strip_titles
from tools.effects import from_mcp

DESCRIPTION_LIMIT = 1000  # characters; some servers ship pages of prose per tool
_BAD = re.compile(r"[^A-Za-z0-9_-]")


class McpArgs(BaseModel):
    """Arguments pass through as given: the server validates them against its own schema."""

    model_config = ConfigDict(extra="allow")


def tool_name(server: str, remote: str) -> str:
    # Provider function names allow [A-Za-z0-9_-]{1,64}.
    return f"{server}__{_BAD.sub('_', remote)}"[:64]


def clean_schema(raw: dict[str, Any] | None) -> dict[str, Any]:
    schema = strip_titles(copy.deepcopy(raw)) if isinstance(raw, dict) else {}
    schema.pop("$schema", None)
    schema.setdefault("type", "object")
    schema.setdefault("properties", {})
    return schema


def render_result(result: types.CallToolResult) -> ToolOutput:
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, types.TextContent):
            parts.append(block.text)
        elif isinstance(block, types.ImageContent | types.AudioContent):
            parts.append(f"[{block.type} {block.mime_type} omitted]")
        elif isinstance(block, types.EmbeddedResource):
            res = block.resource
            if isinstance(res, types.TextResourceContents):
                parts.append(res.text)
            else:
                parts.append(f"[resource {res.uri} omitted]")
        elif isinstance(block, types.ResourceLink):
            parts.append(f"[resource link {block.uri}]")
    text = "\n".join(parts)
    if result.is_error:
        raise ToolError(text or "the MCP tool reported an error")
    if not text and result.structured_content is not None:
        sc = result.structured_content
        return sc if isinstance(sc, dict | list) else str(sc)
    return text or "(no output)"


CallFn = Callable[[str, dict[str, Any]], Awaitable[types.CallToolResult]]


def build_tool(server: str, remote: types.Tool, call: CallFn) -> Tool[McpArgs]:
    description = " ".join((remote.description or remote.title or remote.name).split())
    if len(description) > DESCRIPTION_LIMIT:
        description = description[: DESCRIPTION_LIMIT - 1] + "…"

    async def run(params: McpArgs, c: ToolCall) -> ToolOutput:
        return render_result(await call(remote.name, params.model_dump()))

    return Tool(
        name=tool_name(server, remote.name),
        description=f"[{server}] {description}",
        params=McpArgs,
        run=run,
        parameters=clean_schema(remote.input_schema),
        effects=from_mcp(remote.annotations, f"the MCP tool {server}/{remote.name}"),
    )
