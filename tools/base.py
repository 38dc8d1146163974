"""What a tool is: a typed async function plus its schema and capability hints.

A tool's `run(params, call)` gets validated pydantic params and a `ToolCall` that
carries the per-request context. Long-lived resources (HTTP client, runner, embedder)
are closed over when the tool is built; anything per request lives on the context,
so nothing a request did leaks into the next.
"""

from __future__ import annotations

import asyncio
import copy
import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar
from zoneinfo import ZoneInfo

from pydantic import BaseModel

P = TypeVar("P", bound=BaseModel)
ToolOutput = str | dict[str, Any] | list[Any]
Clock = Callable[[], datetime]


def system_clock() -> datetime:
    return datetime.now(UTC)


class ToolError(Exception):
    """A tool failed in a way the model should hear about: the text goes back as the result."""


@dataclass(frozen=True)
class Capabilities:
    """Hints about what a tool touches, for the prompt, /tools and future policy."""

    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    network: bool = False
    runs_code: bool = False


@dataclass
class RequestContext:
    """One user message being answered: who, where, and per-request state."""

    request_id: str
    user_id: int  # users.id
    session_id: int  # sessions.id
    trigger_message_id: int | None  # messages.id of the user's message
    user_name: str = ""
    telegram_user_id: int | None = None
    chat_id: int | None = None
    timezone: ZoneInfo = field(default_factory=lambda: ZoneInfo("UTC"))
    clock: Clock = system_clock
    # Per-request scratch space a tool may use; a fresh dict for every request.
    state: dict[str, Any] = field(default_factory=dict)
    # Set by the runtime when the session must end after this request (e.g. the model
    # asked for a new session); the adapter reads it.
    new_session_requested: bool = False
    # Tasks a tool started that must finish before the request is over.
    background: list[asyncio.Task[Any]] = field(default_factory=list)
    # Files a tool made for the user, (name, bytes), e.g. what code wrote to ./output/;
    # the adapter delivers them with the answer.
    files_out: list[tuple[str, bytes]] = field(default_factory=list)

    def now(self) -> datetime:
        return self.clock()


@dataclass(frozen=True)
class ToolCall:
    """One call of one tool: the model's call id, its reasoning text, and the request."""

    ctx: RequestContext
    call_id: str
    reasoning: str = ""


@dataclass(frozen=True)
class Tool(Generic[P]):
    name: str
    description: str
    params: type[P]
    run: Callable[[P, ToolCall], Awaitable[ToolOutput]]
    capabilities: Capabilities = Capabilities()

    def schema(self) -> dict[str, Any]:
        """The OpenAI function-tool schema for this tool."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": json_schema(self.params),
            },
        }


@functools.cache
def json_schema(model: type[BaseModel]) -> dict[str, Any]:
    """A compact JSON schema: no titles, $defs inlined (some providers reject $ref).

    Cached per model (pydantic rebuilds it in ~1 ms each time, on every model call);
    the returned dict is shared, so callers must not mutate it.
    """
    raw = model.model_json_schema()
    defs = raw.pop("$defs", {})

    def clean(node: Any, in_properties: bool = False) -> Any:
        if isinstance(node, dict):
            if "$ref" in node and not in_properties:
                target = defs[node["$ref"].split("/")[-1]]
                return clean(copy.deepcopy(target))
            if in_properties:  # keys here are field names: a field may be called "title"
                return {k: clean(v) for k, v in node.items()}
            return {
                k: clean(v, in_properties=(k == "properties"))
                for k, v in node.items()
                if k != "title"
            }
        if isinstance(node, list):
            return [clean(v) for v in node]
        return node

    out: dict[str, Any] = clean(raw)
    out.setdefault("properties", {})
    return out


@dataclass(frozen=True)
class CheckResult:
    """One line of `sidekick doctor`: what was checked, and the fix when it failed."""

    name: str
    ok: bool
    detail: str = ""
    fix: str = ""
