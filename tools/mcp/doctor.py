"""doctor: one row per configured MCP server, up with its tool count or why not."""

from __future__ import annotations

from tools.base import CheckResult
from tools.mcp.manager import McpManager

FIX = "check its command/url in MCP_CONFIG; run the command by hand to see errors"


def server_checks(mcp: McpManager | None) -> list[CheckResult]:
    out: list[CheckResult] = []
    for st in mcp.status() if mcp is not None else []:
        state = (
            f"up, {st.tools} tool{'s' if st.tools != 1 else ''}"
            if st.up
            else (st.error or "not running")
        )
        out.append(CheckResult(f"MCP {st.name}", st.up, state, FIX))
    return out
