"""Shared setup for the extension-tool tests: an App whose MCP_CONFIG runs the fake server."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from bot.app import App, build_app
from bot.llm.client import LLMClient
from tests.conftest import make_settings
from tests.fakes.openai_server import FakeOpenAI

FAKE_SERVER = Path(__file__).parent / "fakes" / "mcp_server.py"


def write_mcp_config(tmp_path: Path, *, extras: bool = False, **more: Any) -> Path:
    args = [str(FAKE_SERVER), *(["--extras"] if extras else [])]
    servers: dict[str, Any] = {"fake": {"command": sys.executable, "args": args, "env": {}}}
    servers.update(more)
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


async def build_tools_app(tmp_path: Path, fake_llm: FakeOpenAI, **settings: Any) -> App:
    # These tests call MCP tools (they write, unannotated) with no one to ask: APPROVALS=off.
    s = make_settings(tmp_path, fake_llm, **{"approvals": "off", **settings})
    llm = LLMClient(s, retry_base_delay=0.01, retry_max_delay=0.05)
    return await build_app(s, llm=llm)


def tool_results(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


def tool_names(body: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools") or []]
