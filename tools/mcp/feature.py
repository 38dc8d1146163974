"""MCP servers as extension tools: MCP_CONFIG names them, DATA_DIR/mcp.log takes their stderr.

tools/registry.py starts them as a tool source of the registry (their tools appear at run
time); the feature declares the settings and the doctor's row per server."""

from __future__ import annotations

from tools.base import CheckResult
from tools.feature import Feature, Host
from tools.mcp.doctor import server_checks
from tools.mcp.settings import ExtensionSettings
from tools.registry import mcp_manager


async def check(host: Host) -> list[CheckResult]:
    return server_checks(mcp_manager(host.registry))


FEATURE = Feature(name="mcp", settings=ExtensionSettings, doctor=check)
