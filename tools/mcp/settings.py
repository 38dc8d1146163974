"""Extension tools' settings: the MCP servers' config file and where their stderr goes."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel


class ExtensionSettings(BaseModel):
    mcp_config: Path | None = None
    # Where stdio servers' stderr goes: unset, the bot's own stderr (`sidekick chat` uses
    # DATA_DIR/mcp.log so servers' chatter stays out of the conversation).
    mcp_log_file: Path | None = None
