"""What a feature is: one declaration in its own folder, listed once in bot/features.py.

A feature declares its settings slice and a setup that imports the rest and returns what
it adds (Setup); the app derives everything else from the list (CONTRIBUTING.md walks
through adding one). A feature under tools/ reaches the running app only through `Host`, a
typed protocol the app implements, never by importing bot/.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from functools import cached_property
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeAlias, TypeVar
from zoneinfo import ZoneInfo

from tools.state import Key

if TYPE_CHECKING:
    # Types only: the list of features is read with the settings (`sidekick --version`, a
    # bad setting's exit), which need none of the database, the model or the web server.
    from aiohttp import web
    from pydantic import BaseModel

    from db.repos.core import Recipient
    from tools.base import CheckResult, RequestContext, ToolDeps, ToolModule
    from tools.chat import ChatModel
    from tools.hooks import File, Gate, RequestHooks

    # the registry imports the extension machinery; a feature needs only the type
    from tools.registry import Registry

T = TypeVar("T")


class Deliver(Protocol):
    """(recipient, text, markdown, files, buttons) -> the id of the message it arrived as;
    raises on failure. The files follow the text, as documents; the buttons (label, the
    routed data `button_data` makes) ride on the text's last message."""

    async def __call__(
        self,
        recipient: Recipient,
        text: str,
        markdown: bool,
        files: Sequence[File] = (),
        buttons: Sequence[tuple[str, str]] = (),
    ) -> int: ...


@dataclass(frozen=True)
class Provide(Generic[T]):
    """A part a feature builds once per process. Built with the app, in the list's order
    (a builder may `await host.need(other)` for a part it depends on), or when an adapter
    starts (`on_start`: it delivers or runs in the background, so `sidekick doctor` never
    builds it); stopped at shutdown in reverse order."""

    key: Key[T]
    build: Callable[[Host], Awaitable[T]]
    stop: Callable[[T], Awaitable[None]] | None = None
    on_start: bool = False


class Host(Protocol):
    """What a feature's commands, jobs and parts may use of the running app."""

    @property
    def deps(self) -> ToolDeps: ...

    @property
    def registry(self) -> Registry:
        """The tools the app offers (features, MCP servers, discovery)."""
        ...

    def part(self, key: Key[T]) -> T:
        """The part a listed feature built under `key`; LookupError when none did (its
        feature is not listed, or an on_start part before an adapter started)."""
        ...

    def has(self, key: Key[Any]) -> bool:
        """Whether a listed feature provides `key`, or what runs the app handed it in."""
        ...

    def maybe(self, key: Key[T]) -> T | None:
        """The part when it is built or handed in, None otherwise (a feature switched off,
        an on_start part before an adapter started)."""
        ...

    async def need(self, key: Key[T]) -> T:
        """The part, built now if it is not yet (a builder's dependency)."""
        ...

    async def wrapped(self, model: ChatModel) -> ChatModel:
        """`model` inside every listed feature's model wrappers (metering, ...)."""
        ...

    async def model_client(self, timeout_s: float) -> ChatModel:
        """A client of the model of its own whose answers may take `timeout_s` (session
        summaries on a slow local server), wrapped like the app's."""
        ...

    @property
    def local(self) -> bool:
        """True in the terminal chat, which serves its local user only (no Telegram id)."""
        ...

    @property
    def deliver(self) -> Deliver:
        """Send a message the user did not ask for just now (a reminder, a finished code
        job) through whichever adapter runs."""
        ...

    async def ask(self, recipient: Recipient, prompt: str) -> str:
        """Run a prompt through the agent for that user, as a scheduled task; the answer."""
        ...


@dataclass(frozen=True)
class Button:
    label: str
    data: str  # handed back to the feature's `press` (Telegram allows 64 bytes in all)


@dataclass(frozen=True)
class WebApp:
    """A button that opens an https page inside Telegram as a Mini App (Telegram hands the
    page who opened it, signed). The terminal has none: the answer's text must stand alone."""

    label: str
    url: str


class MenuApp(Protocol):
    """What the chat's menu button opens, for an adapter that has one (Telegram)."""

    def menu(self) -> WebApp | None:
        """The Mini App the menu opens; None: the adapter's own button (a Mini App set
        by an earlier run would open nothing)."""
        ...


MENU: Key[MenuApp] = Key("chat.menu")


class WebPages(Protocol):
    """Pages a feature serves from the adapter's own HTTP server where it has one (the
    webhook's: behind the HTTPS reverse proxy that already reaches the bot)."""

    def routes(self) -> list[web.RouteDef]: ...


PAGES: Key[WebPages] = Key("web.pages")


@dataclass(frozen=True)
class Answer:
    """A command's reply: text (plain), and what the adapter shows where it can: buttons,
    a chart (PNG, sent above the text), a file. The terminal prints the text, and says where
    it saved a file."""

    text: str
    buttons: tuple[tuple[Button, ...], ...] = ()
    markdown: bool = False  # Telegram renders it (bold, code blocks); the terminal prints it
    # Draws the chart (PNG, or None: no data, no matplotlib) when the adapter shows one: the
    # terminal shows none, so it neither reads the chart's rows nor loads matplotlib.
    chart: Callable[[], Awaitable[bytes | None]] | None = None
    file: tuple[str, bytes] | None = None  # (name, content)
    # Messages that follow this one, each with its own buttons (one per item of a list whose
    # items would not share one message: /codefailures).
    more: tuple[Answer, ...] = ()
    web_app: WebApp | None = None  # above the buttons, where the adapter opens Mini Apps


@dataclass(frozen=True)
class Who:
    """The user a command or button press is for, as both adapters resolve them."""

    user_id: int  # users.id
    telegram_id: int | None
    name: str
    tz: ZoneInfo
    chat_id: int | None = None


@dataclass(frozen=True)
class CommandCall:
    host: Host
    who: Who
    args: str  # what follows the command (for a button press: the button's data)


CommandRun = Callable[[CommandCall], Awaitable[Answer | str]]


@dataclass(frozen=True)
class Command:
    """One slash command: Telegram's menu and /help, and the terminal's, list it."""

    name: str
    about: str
    run: CommandRun
    aliases: tuple[str, ...] = ()
    # False: only Telegram answers it (the terminal says so).
    terminal: bool = True
    # Its answer is the user's private data (/memory): asked in a group, it goes to the
    # user's private chat, and the group hears only where it went.
    private: bool = False
    # What may follow the name, as /help shows it after the name: `[days]`, `HH:MM-HH:MM`.
    args: str = ""

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name, *self.aliases)


@dataclass(frozen=True)
class Pressed:
    """What a button press did: a short toast, and the message's new content (None, or an
    answer without text: keep it); the answer's file, if any, is sent as well."""

    toast: str
    answer: Answer | None = None
    alert: bool = False


@dataclass(frozen=True)
class Job:
    """A periodic job; the scheduler runs it on a grid of `every` (whole minutes), once at
    start-up too (the catch-up after downtime), one worker at a time."""

    id: str
    about: str
    every: timedelta
    run: Callable[[Host], Awaitable[Any]]


Doctor: TypeAlias = "Callable[[Host], Awaitable[list[CheckResult]]]"
# A section of the newest user turn's [context] block (memory auto-recall, ...): given the
# request and the user's text, its text or None.
ContextProvider: TypeAlias = "Callable[[RequestContext, str], Awaitable[str | None]]"


@dataclass(frozen=True)
class Setup:
    """What a feature adds to the app, made by its Feature's `setup` when the app is built."""

    tools: tuple[ToolModule, ...] = ()
    models: tuple[type[Any], ...] = ()  # its tables (Alembic's metadata is their union)
    commands: tuple[Command, ...] = ()
    # Presses of the buttons its answers carry (CommandCall.args = the button's data).
    press: Callable[[CommandCall], Awaitable[Pressed]] | None = None
    jobs: tuple[Job, ...] = ()
    parts: tuple[Provide[Any], ...] = ()
    # Model wrappers (tools/chat.py ModelWrapper), around the model in the list's order:
    # the first listed feature's is innermost.
    wraps: tuple[Callable[[Host, ChatModel], Awaitable[ChatModel]], ...] = ()
    # Per-request hooks (tools/hooks.py); a builder may return None (off under these
    # settings). Built with the agent, after the parts and the tools.
    turns: tuple[Callable[[Host], RequestHooks | None], ...] = ()
    # What every tool call passes before it runs (approvals).
    gates: tuple[Callable[[Host], Gate | None], ...] = ()
    # Sections of every prompt's [context] block, built with the agent; a builder may
    # return None (the feature is off under these settings).
    context: tuple[Callable[[ToolDeps], ContextProvider | None], ...] = ()
    # What the first message would otherwise wait for (a model to load), warmed in the
    # background once an adapter starts.
    warm: tuple[Callable[[Host], Awaitable[None]], ...] = ()
    doctor: Doctor | None = None


@dataclass(frozen=True)
class Feature:
    """A feature as the list names it: its name, its settings slice, and `setup`, which
    imports the rest and says what it adds. A process that only reads the settings
    (`sidekick --version`, a bad setting's exit) never calls it, so the feature module
    imports its heavy modules inside `setup`."""

    name: str
    setup: Callable[[], Setup]
    settings: type[BaseModel] | None = None  # its settings slice (env var = field name)

    @cached_property
    def adds(self) -> Setup:
        """What `setup` returned, made once (the app, the menu and the doctor all read it)."""
        return self.setup()


def button_data(feature: Feature, data: str) -> str:
    """The callback data of a feature's button: routed back to it by its name."""
    return f"{feature.name}:{data}"


ROW_ID_MAX = 2**31 - 1  # an INTEGER key: 32 bits on PostgreSQL


def row_id(text: str) -> int | None:
    """A row id read back from a button's data (which anyone can forge), or None. Only ASCII
    digits (str.isdigit also takes "²", which int() refuses) and no more than a database
    integer holds (a longer number overflowed the driver and failed the press)."""
    if not text.isascii() or not text.isdigit() or len(text) > 10:
        return None
    number = int(text)
    return number if number <= ROW_ID_MAX else None


def bounded(text: str | None, default: int, high: int) -> int | None:
    """A whole number from 1 to `high` a person typed (a command's argument, a page in an
    address): `default` when nothing was typed, None when it is not such a number."""
    if text is None or not text.strip():
        return default
    number = row_id(text.strip())
    return number if number is not None and 1 <= number <= high else None
