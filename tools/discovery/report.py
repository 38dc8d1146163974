"""The plain-text report for /tools (no Telegram here)."""

from __future__ import annotations

from tools.mcp.manager import McpManager
from tools.registry import Discovery
from tools.tokens import count_payload, tokenizer_name

LIST_LIMIT = 12


def _names(names: list[str]) -> str:
    shown = ", ".join(names[:LIST_LIMIT])
    more = len(names) - LIST_LIMIT
    return shown + (f" (+{more} more)" if more > 0 else "") if names else "none"


def tools_text(disc: Discovery, user_id: int, mcp: McpManager | None) -> str:
    cat = disc.catalog()
    plan = disc.plan(user_id, cat)

    def tokens(names: list[str]) -> int:
        tools = [cat.core.get(n) or cat.extensions[n] for n in names]
        return count_payload([t.schema() for t in tools])

    core = list(cat.core)
    lines = [
        f"Tools (budget {disc.budget} tokens per call, counted with {tokenizer_name()})",
        f"Core, always shown — {_count(core)}, {tokens(core)} tokens: {_names(core)}",
        f"Direct — {_count(plan.direct)}, {tokens(plan.direct)} tokens: {_names(plan.direct)}",
    ]
    if plan.meta:
        lines.append(
            f"Discoverable through tool_search — {_count(plan.discoverable)}, "
            f"{tokens(plan.discoverable)} tokens if all were shown: {_names(plan.discoverable)}"
        )
        lines.append(f"tool_search + tool_explain cost {cat.meta_cost} tokens.")
    elif plan.discoverable:
        lines.append(
            f"Searched only (skills) — {_count(plan.discoverable)}: {_names(plan.discoverable)}; "
            f"tool_search + tool_explain ({cat.meta_cost} tokens) join a request that "
            "mentions one, and one called by its name is loaded then."
        )
    else:
        lines.append("Discoverable — none: every tool fits the budget.")
    if mcp is not None and mcp.servers:
        parts = []
        for st in mcp.status():
            state = f"up, {tools_count(st.tools)}" if st.up else f"DOWN ({st.error or 'starting'})"
            parts.append(f"{st.name}: {state}")
        lines.append("MCP servers — " + "; ".join(parts))
    return "\n".join(lines)


def tools_count(n: int) -> str:
    """`1 tool`, `3 tools`."""
    return f"{n} tool{'s' if n != 1 else ''}"


def _count(names: list[str]) -> str:
    return tools_count(len(names))
