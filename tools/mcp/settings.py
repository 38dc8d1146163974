"""Extension tools' settings: MCP servers and the tool list's token budget."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field


class ExtensionSettings(BaseModel):
    mcp_config: Path | None = None
    mcp_timeout_s: float = Field(default=60.0, gt=0, le=3600)
    # Where stdio servers' stderr goes: unset, the bot's own stderr (`sidekick chat` uses
    # DATA_DIR/mcp.log so servers' chatter stays out of the conversation).
    mcp_log_file: Path | None = None
    tool_token_budget: int = Field(default=3800, ge=200)
