"""Extension tools' settings: the MCP servers' config file."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel


class ExtensionSettings(BaseModel):
    mcp_config: Path | None = None


# Where stdio servers' stderr is appended, in DATA_DIR: a file of its own, so servers'
# chatter stays out of the terminal chat's screen and out of the bot's log. Not a setting
# (MCP_LOG_FILE was): DATA_DIR already says where the bot's files go.
MCP_LOG = "mcp.log"
