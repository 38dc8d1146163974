"""MCP servers as extension tools: MCP_CONFIG names them, DATA_DIR/mcp.log takes their stderr.

tools/registry.py starts them with the registry and reads their tools from the manager's
listing; the feature declares the settings and the doctor's row per server."""

from __future__ import annotations

from tools.feature import Feature, Host, Setup
from tools.mcp.settings import ExtensionSettings

FIX = "check its command/url in MCP_CONFIG; run the command by hand to see errors"


def setup() -> Setup:
    from tools.base import CheckResult

    async def check(host: Host) -> list[CheckResult]:
        """One row per configured MCP server: up with its tool count, or why not."""
        mcp = host.registry.mcp
        out: list[CheckResult] = []
        for st in mcp.status() if mcp is not None else []:
            tools = f"up, {st.tools} tool{'s' if st.tools != 1 else ''}"
            found = tools if st.up else st.error or "not running"
            out.append(CheckResult(f"MCP {st.name}", st.up, found, FIX))
        return out

    return Setup(doctor=check)


FEATURE = Feature(name="mcp", settings=ExtensionSettings, setup=setup)
