"""What a tool is: a typed async function plus its schema and capability hints.

A tool's `run(params, call)` gets validated pydantic params and a `ToolCall` that
carries the per-request context. Long-lived resources (HTTP client, runner, embedder)
are closed over when the tool is built; anything per request lives on the context,
so nothing a request did leaks into the next.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Awaitable, Callable, KeysView
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import httpx
from pydantic import BaseModel

from db.engine import SessionFactory
from tools.chat import HELD
from tools.effects import NONE, Declared, Effects
from tools.errors import ConfigError, ProviderError, ToolError
from tools.model_call import ModelCall, Purpose
from tools.state import Key, Slot

__all__ = ["ConfigError", "ProviderError", "ToolError"]

P = TypeVar("P", bound=BaseModel)
T = TypeVar("T")
S = TypeVar("S", bound=BaseModel)
ToolOutput = str | dict[str, Any] | list[Any]
Clock = Callable[[], datetime]


@dataclass(frozen=True)
class FromOutside:
    """A result known to be outside content only once the call ran (code that reached the
    network: what it printed may be a page's words). The runtime marks it as a result its
    tool declares outside (Effects.outside) is marked: for the model, in the history, and
    in what the turn has seen."""

    source: str  # "the output of code that reached example.org"
    output: ToolOutput


def system_clock() -> datetime:
    return datetime.now(UTC)


def user_tz(name: str | None, default: ZoneInfo) -> ZoneInfo:
    """A user's own zone, or the default when they have none (or a stored one went bad)."""
    try:
        return ZoneInfo(name) if name else default
    except (ZoneInfoNotFoundError, ValueError):
        return default


@dataclass
class RequestContext:
    """One user message being answered: who, where and when (and why: a chat or a scheduled
    task); what a feature keeps per request lives in its own Slot."""

    request_id: str
    user_id: int  # users.id
    session_id: int  # sessions.id
    trigger_message_id: int | None  # messages.id of the user's message
    user_name: str = ""
    telegram_user_id: int | None = None
    chat_id: int | None = None
    timezone: ZoneInfo = field(default_factory=lambda: ZoneInfo("UTC"))
    clock: Clock = system_clock
    purpose: Purpose = "chat"  # "scheduled": a scheduled task runs it, nobody is watching
    _state: dict[Slot[Any], Any] = field(default_factory=dict, repr=False)

    def state(self, slot: Slot[T]) -> T:
        """This request's value of a feature's slot (made on first read)."""
        if slot not in self._state:
            self._state[slot] = slot.default()
        value: T = self._state[slot]
        return value

    def held(self) -> KeysView[Slot[Any]]:
        """The slots this request has read or set so far (tools/hooks.py TurnHooks.when)."""
        return self._state.keys()

    @property
    def scheduled(self) -> bool:
        return self.purpose == "scheduled"

    def now(self) -> datetime:
        return self.clock()

    @property
    def shared_chat(self) -> bool:
        """A chat with others in it (a Telegram group): the answer is read by every member.
        A private chat's id is the user's own id; the terminal has no chat id."""
        return self.chat_id is not None and self.chat_id != self.telegram_user_id

    @property
    def chat(self) -> int | None:
        """The chat this request's session is held in: the group's id, None for the user's
        own chat (db/conversation.py chat_scope)."""
        return self.chat_id if self.shared_chat else None


@dataclass(frozen=True)
class ToolCall:
    """One call of one tool: the model's call id, its reasoning text, and the request."""

    ctx: RequestContext
    call_id: str
    reasoning: str = ""


BRIEF_CHARS = 300


def plain_brief(output: ToolOutput) -> str | None:
    """A short text result as it is ("stored #3", "Scheduled reminder #2 …"); JSON is for
    the model, not the person."""
    if isinstance(output, str) and output.strip() and len(output.strip()) <= BRIEF_CHARS:
        return output.strip()
    return None


@dataclass(frozen=True)
class Tool(Generic[P]):
    """`params` validates the model's arguments; `parameters` is the JSON schema the model
    is shown: derived from `params` for our tools, given as-is for MCP tools (their server
    validates against its own schema). `effects` is what a call does (tools/effects.py),
    fixed or read from its validated params: the approval gate decides from it alone."""

    name: str
    description: str
    params: type[P]
    run: Callable[[P, ToolCall], Awaitable[ToolOutput | FromOutside]]
    parameters: dict[str, Any] = field(default_factory=dict)
    effects: Declared = NONE
    # What the person reads of a result when the model says nothing after the call (a
    # small model often does): one short line, or None to name the tool only.
    brief: Callable[[ToolOutput], str | None] = plain_brief
    # The field arguments fill when they are plain text, no JSON object: a small model
    # writes `{"name": "code", "arguments": "let s = …"}`. None: such a call is an error.
    text_field: str | None = None
    # The argument sets the tool accepts, as a JSON schema stricter than `parameters`, for a
    # reply the server holds to a grammar (bot/llm/constrained.py): never shown to the model
    # (no prompt tokens), only what it may write. None: `parameters`.
    held: dict[str, Any] | None = None
    # What the tool would refuse in a call, known before it runs: checked before any gate,
    # so a person is never asked to allow a call the tool then turns down (the 0.5B model's
    # reminder was allowed, then refused as two times, and its corrected call was a second
    # question). None: nothing to check before running.
    refuses: Callable[[P, ToolCall], str | None] | None = None
    # The schema, built once with the tool: every model call offers it (shared, so whoever
    # reads it must not change it, as with `parameters`).
    _schema: dict[str, Any] = field(init=False, repr=False, compare=False)

    def effects_of(self, params: P) -> Effects:
        return self.effects if isinstance(self.effects, Effects) else self.effects(params)

    def __post_init__(self) -> None:
        if not self.parameters:
            object.__setattr__(self, "parameters", json_schema(self.params))
        function = {
            "name": self.name,
            "description": self.description,
            "parameters": self.parameters,
        }
        if self.held is not None:
            function[HELD] = self.held
        object.__setattr__(self, "_schema", {"type": "function", "function": function})

    def schema(self) -> dict[str, Any]:
        """The OpenAI function-tool schema for this tool (with `held` under HELD, which the
        model client takes out before the request goes)."""
        return self._schema


@functools.cache
def json_schema(model: type[BaseModel]) -> dict[str, Any]:
    """A compact JSON schema: no titles, $defs inlined (some providers reject $ref).

    Cached per model (pydantic rebuilds it each time, on every model call);
    the returned dict is shared, so callers must not mutate it.
    """
    raw = model.model_json_schema()
    defs = raw.pop("$defs", {})

    def inline(node: Any, in_properties: bool = False) -> Any:
        if isinstance(node, dict):
            if "$ref" in node and not in_properties:
                return inline(copy.deepcopy(defs[node["$ref"].split("/")[-1]]))
            return {k: inline(v, k == "properties" and not in_properties) for k, v in node.items()}
        if isinstance(node, list):
            return [inline(v) for v in node]
        return node

    out: dict[str, Any] = compact(strip_titles(inline(raw)))
    out.setdefault("properties", {})
    return out


# What validation checks or fills in but the model need not read: the arguments are
# validated anyway, and a field left out of `required` takes its default.
_CHECKED_ONLY = frozenset(("minLength", "maxLength", "pattern", "minItems", "maxItems", "default"))


def compact(node: Any, in_properties: bool = False) -> Any:
    """A schema as short as it can be read the same: an optional field (pydantic's
    `{"anyOf": [X, {"type": "null"}], "default": null}`) is X, left out of `required`;
    defaults, lengths and patterns stay with the validation. Small models carry every token of the
    tools in their context (five tools were 1,971 tokens on Qwen's template, 490 of them
    for nulls)."""
    if isinstance(node, list):
        return [compact(v) for v in node]
    if not isinstance(node, dict):
        return node
    if in_properties:
        return {k: compact(v) for k, v in node.items()}
    alternatives = node.get("anyOf")
    if isinstance(alternatives, list) and {"type": "null"} in alternatives:
        rest = [a for a in alternatives if a != {"type": "null"}]
        if len(rest) == 1 and isinstance(rest[0], dict) and node.get("default", None) is None:
            node = {**rest[0], **{k: v for k, v in node.items() if k != "anyOf"}}
    return {
        k: compact(v, k == "properties")
        for k, v in node.items()
        if k not in _CHECKED_ONLY or isinstance(v, dict | list)
    }


def strip_titles(node: Any, in_properties: bool = False) -> Any:
    """A schema without "title" annotations: they cost tokens and tell the model nothing
    the name does not. Inside "properties" the keys are field names (a field may be
    called "title"), so those stay."""
    if isinstance(node, dict):
        if in_properties:
            return {k: strip_titles(v) for k, v in node.items()}
        return {
            k: strip_titles(v, k == "properties")
            for k, v in node.items()
            if not (k == "title" and isinstance(v, str))
        }
    if isinstance(node, list):
        return [strip_titles(v) for v in node]
    return node


@dataclass(frozen=True)
class CheckResult:
    """One line of `sidekick doctor`: what was checked, and the fix when it failed."""

    name: str
    ok: bool
    detail: str = ""
    fix: str = ""


class TextModel(Protocol):
    """What a tool may ask of the LLM: one plain completion (code generation, summaries).
    `call` says for whom and why, so the call is metered; it may raise BudgetExceeded."""

    async def complete_text(
        self,
        messages: list[dict[str, Any]],
        max_tokens: int | None = None,
        *,
        call: ModelCall | None = None,
    ) -> str: ...


@dataclass(frozen=True)
class ModelEndpoint:
    """The chat model's endpoint, for a tool that lets a program of its own reach the model
    (the code tool's OpenCode jobs, through a relay that adds the key on the bot's side)."""

    base_url: str
    api_key: str | None = field(repr=False)
    model: str
    others: tuple[str, ...] = ()  # the models /model offers besides `model`
    max_output_tokens: int | None = None  # LLM_MAX_OUTPUT_TOKENS: every call's ceiling
    # How many tokens the model's context holds (None: unknown): a program that talks to
    # the model with a long prompt of its own checks first that it fits.
    context_tokens: Callable[[], Awaitable[int | None]] | None = field(default=None, repr=False)
    # The model's size in parameters (None: unknown): a small model's reading of what the
    # person asked is confirmed with them before it is acted on (tools/reminders/asked.py).
    parameters: Callable[[], Awaitable[int | None]] | None = field(default=None, repr=False)


@dataclass
class ToolDeps:
    """Long-lived resources shared by every request; tools close over what they need."""

    settings: BaseModel  # the app's settings: every feature's slice (settings_for)
    session_factory: SessionFactory
    http: httpx.AsyncClient
    llm: TextModel
    clock: Clock = system_clock
    # Closers for resources tools opened (subprocess pools, caches); run at shutdown.
    closers: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    # The parts the listed features built (tools/feature.py Provide), the app's own record
    # of them: a tool is built from the deps alone, so it reaches a part here (`maybe`).
    parts: dict[Key[Any], Any] = field(default_factory=dict, repr=False)
    # Where tools keep files between requests (DATA_DIR): the code tool's inputs.
    data_dir: Path = Path("./data")
    endpoint: ModelEndpoint | None = None  # None: no tool may hand the model on
    tz: ZoneInfo = field(default_factory=lambda: ZoneInfo("UTC"))  # TZ: users without their own
    owners: tuple[int, ...] = ()  # ALLOWED_USER_IDS: who may talk to the bot, the owner first
    scrub: Callable[[str], str] = str  # masks the settings' secrets in a text

    def settings_for(self, model: type[S]) -> S:
        """A feature's own settings slice, typed: the settings hold every listed feature's
        (bot/config.py derives their union), so a feature needs no line elsewhere to read
        its own."""
        if not isinstance(self.settings, model):
            raise TypeError(f"the settings do not include {model.__name__}: is the tool listed?")
        return self.settings

    def maybe(self, key: Key[T]) -> T | None:
        """The part built under `key`, None when no listed feature built it (as Host.maybe)."""
        value: T | None = self.parts.get(key)
        return value


class Unavailable(Exception):
    """Raised by a tool's `build` when the settings leave it unusable (search without a
    backend, no bun): the registry leaves it out of what the model is offered, and says why
    in the log and /tools."""


@dataclass(frozen=True)
class ToolModule:
    """A tool as its feature declares it (tools/feature.py `tools`; the feature declares the
    settings and the doctor check): the registry builds it and the system prompt's line."""

    name: str
    build: Callable[[ToolDeps], Tool[Any]]  # may raise Unavailable
    prompt: str  # the one line the system prompt says about the tool
    # Extensions (web_fetch) are shown while they fit TOOL_TOKEN_BUDGET, else found through
    # tool_search; core tools are always shown.
    extension: bool = False


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


@dataclass
class Listing:
    """Tools that come and go while the bot runs (an MCP server's, the skills) and the
    system prompt's line about them. What lists them rewrites both when they change, so no
    request asks it for them (tools/registry.py reads them as they stand). `searched`: found
    through tool_search only, never shown up front (the skills, which their line names);
    else shown while they fit the tool budget, like any extension (MCP tools)."""

    searched: bool
    tools: dict[str, Tool[Any]] = field(default_factory=dict)
    line: str = ""
