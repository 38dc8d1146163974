"""The one list of tools. Each tool module exposes `build(deps) -> Tool`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import httpx

from bot.config import Settings
from db.engine import SessionFactory
from tools.base import Clock, RequestContext, Tool, system_clock

if TYPE_CHECKING:
    from tools.memory.store import MemoryStore


class TextModel(Protocol):
    """What a tool may ask of the LLM: one plain completion (code generation, summaries)."""

    async def complete_text(
        self, messages: list[dict[str, Any]], max_tokens: int | None = None
    ) -> str: ...


@dataclass
class ToolDeps:
    """Long-lived resources shared by every request; tools close over what they need."""

    settings: Settings
    session_factory: SessionFactory
    http: httpx.AsyncClient
    llm: TextModel
    clock: Clock = system_clock
    # Closers for resources tools opened (subprocess pools, caches); run at shutdown.
    closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    # The memory store (built once by the app; None in tests that do not need it).
    memory: MemoryStore | None = None


@dataclass
class RequestTools:
    """The tools one request may call and the schemas the model is shown.

    Fresh per request; the agent asks for `schemas()` before every model call, so a
    subclass may grow the list during a request (tool discovery).
    """

    tools: dict[str, Tool[Any]]

    def schemas(self) -> list[dict[str, Any]]:
        return [t.schema() for t in self.tools.values()]

    def get(self, name: str) -> Tool[Any] | None:
        return self.tools.get(name)

    def unknown(self, name: str) -> str:
        """The error text for a call to a tool this request cannot call."""
        known = ", ".join(sorted(self.tools)) or "none"
        return f"unknown tool {name!r}; the tools are: {known}"


class ToolSource(Protocol):
    """Tools that appear at run time (MCP servers): started with the bot, listed per request."""

    async def start(self) -> None: ...

    def tools(self) -> list[Tool[Any]]: ...


class RequestPlanner(Protocol):
    """Chooses a request's tool set (tools/discovery): core always, extensions in budget."""

    async def start(self) -> None: ...

    def for_request(self, ctx: RequestContext, text: str) -> RequestTools: ...


class Registry:
    def __init__(self, tools: Iterable[Tool[Any]]) -> None:
        self.tools: dict[str, Tool[Any]] = {}
        for tool in tools:
            if tool.name in self.tools:
                raise ValueError(f"two tools named {tool.name!r}")
            self.tools[tool.name] = tool
        # Extension tools (web_fetch, MCP servers): shown while they fit TOOL_TOKEN_BUDGET,
        # else reached through tool_search. `self.tools` are the core tools, always shown.
        self.extensions: dict[str, Tool[Any]] = {}
        self.sources: list[ToolSource] = []
        self.planner: RequestPlanner | None = None

    def extension_tools(self) -> dict[str, Tool[Any]]:
        out = dict(self.extensions)
        for source in self.sources:
            for tool in source.tools():
                out.setdefault(tool.name, tool)
        return out

    async def start(self) -> None:
        """Start tool sources (MCP servers) and load what the planner learned."""
        for source in self.sources:
            await source.start()
        if self.planner is not None:
            await self.planner.start()

    def schemas(self) -> list[dict[str, Any]]:
        return [t.schema() for t in self.tools.values()]

    def names(self) -> list[str]:
        return list(self.tools)

    def for_request(self, ctx: RequestContext, text: str) -> RequestTools:
        if self.planner is not None:
            return self.planner.for_request(ctx, text)
        return RequestTools({**self.extension_tools(), **self.tools})


def build_registry(deps: ToolDeps) -> Registry:
    """Every tool Sidekick offers: the core tools in the order the model sees them, then
    the extensions (web_fetch, MCP servers, tool discovery)."""
    # Imported here: these modules import ToolDeps from this one.
    from tools.code.tool import build as code_tool
    from tools.extensions import install_extensions
    from tools.memory.tool import build as memory_tool
    from tools.schedule.tool import build as schedule_tool
    from tools.search.tool import build as search_tool

    registry = Registry(
        [search_tool(deps), code_tool(deps), memory_tool(deps), schedule_tool(deps)]
    )
    install_extensions(registry, deps)
    return registry
