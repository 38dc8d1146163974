"""Every tool's settings in one model: what ToolDeps carries. Each slice lives beside its tool
and is named by its ToolModule; the union is derived from the registry's list, so a new tool
adds no line here. bot/config.py adds the app's own settings and reads them all from the
environment."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from pydantic import BaseModel

from tools.base import ToolModule
from tools.mcp.settings import ExtensionSettings


def settings_union(modules: Iterable[ToolModule]) -> type[BaseModel]:
    """One flat model inheriting every listed tool's settings (field names = variables),
    plus the extension machinery's own (MCP, the tool list's budget)."""
    slices = dict.fromkeys(m.settings for m in modules if m.settings is not None)
    bases: tuple[type[BaseModel], ...] = (*slices, ExtensionSettings)
    doc = "The union of the tools' settings."
    return type("ToolSettings", bases, {"__doc__": doc, "__module__": __name__})


if TYPE_CHECKING:
    # mypy cannot follow a class made at run time. It sees the slices the app itself reads
    # by attribute (bot/); a tool reads its own through ToolDeps.settings_for(Model).
    from tools.code.settings import CodeSettings
    from tools.fetch.settings import FetchSettings
    from tools.memory.settings import MemorySettings
    from tools.search.settings import SearchSettings

    class ToolSettings(
        CodeSettings, MemorySettings, SearchSettings, FetchSettings, ExtensionSettings
    ):
        """The union of the tools' settings."""

else:
    from tools.registry import TOOLS

    ToolSettings = settings_union(TOOLS)
