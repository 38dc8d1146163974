"""doctor: MCP servers up, tool counts, tokens of the tool list."""

from __future__ import annotations

from tools.base import CheckResult
from tools.discovery.report import doctor_checks
from tools.registry import Registry, discovery, mcp_manager


async def check_tools(registry: Registry) -> list[CheckResult]:
    return doctor_checks(discovery(registry), mcp_manager(registry))
