"""doctor: MCP servers up, tool counts, tokens of the tool list."""

from __future__ import annotations

from typing import Any

from tools.base import CheckResult
from tools.discovery.report import doctor_checks
from tools.extensions import discovery, mcp_manager


async def check_tools(app: Any) -> list[CheckResult]:
    return doctor_checks(discovery(app.registry), mcp_manager(app.registry))
