"""/tools: the tools the model can use, what they cost per call and which are found through
tool_search; both adapters print it."""

from __future__ import annotations

from tools.discovery.report import tools_text
from tools.feature import CommandCall


async def tools(call: CommandCall) -> str:
    registry = call.host.registry
    disc = registry.planner
    text = (
        "Tools: " + ", ".join(registry.names())
        if disc is None
        else tools_text(disc, call.who.user_id, registry.mcp)
    )
    off = registry.unusable
    if off:
        text += "\n\nNot offered (not configured):\n" + "\n".join(
            f"• {name}: {why}" for name, why in off.items()
        )
    return text
