"""Every tool's settings in one model: what ToolDeps carries. Each slice lives beside its tool;
bot/config.py adds the app's own settings and reads them all from the environment."""

from __future__ import annotations

from tools.code.settings import CodeSettings
from tools.mcp.settings import ExtensionSettings
from tools.memory.settings import MemorySettings
from tools.search.settings import SearchSettings


class ToolSettings(CodeSettings, MemorySettings, SearchSettings, ExtensionSettings):
    """The union of the tools' settings (flat: the field names are the variable names)."""
