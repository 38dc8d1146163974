"""What a feature is: one declaration in its own folder, listed once in bot/features.py.

A feature declares its settings slice, its tools, its tables, its commands (rendered by both
Telegram and the terminal), its buttons, its scheduled jobs, its long-lived parts and its
doctor check. The app derives everything else from the list: the settings class, Alembic's
metadata, the command menu and both /help's, the scheduler's jobs, the doctor and the
system prompt's tool lines. CONTRIBUTING.md walks through adding one.

This module sits below bot/: a feature under tools/ reaches the running app only through
`Host`, a typed protocol the app implements, never by importing bot/.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Protocol, TypeVar
from zoneinfo import ZoneInfo

from pydantic import BaseModel

from db.repos.core import Recipient
from tools.base import CheckResult, RequestContext, ToolDeps, ToolModule

if TYPE_CHECKING:  # the registry imports the extension machinery; a feature needs only the type
    from tools.registry import Registry

T = TypeVar("T")

# A file sent with a delivered message: (name, content).
File = tuple[str, bytes]


class Deliver(Protocol):
    """(recipient, text, markdown, files) -> the id of the message it arrived as; raises on
    failure. The files follow the text, as documents."""

    async def __call__(
        self, recipient: Recipient, text: str, markdown: bool, files: Sequence[File] = ()
    ) -> int: ...


class Part(Protocol):
    """A long-lived object a feature builds once per process (a job runner, a cache); the
    app stops every part at shutdown, in reverse order of building."""

    async def stop(self) -> None: ...


class Host(Protocol):
    """What a feature's commands, jobs and parts may use of the running app."""

    @property
    def deps(self) -> ToolDeps: ...

    @property
    def registry(self) -> Registry:
        """The tools the app offers, as built from the features (and MCP servers, discovery):
        what /tools reports and the doctor counts."""
        ...

    def part(self, kind: type[T]) -> T:
        """The one part of that type some feature built, or that the app built for the
        features before any adapter starts (the usage Meter); raises LookupError if none."""
        ...

    @property
    def local(self) -> bool:
        """True in the terminal chat, which serves its local user only (no Telegram id)."""
        ...

    async def deliver(
        self, recipient: Recipient, text: str, markdown: bool, files: Sequence[File] = ()
    ) -> int:
        """Send a message the user did not ask for just now (a reminder, a finished code
        job with its files), through whichever adapter runs: Telegram, or the terminal for
        its local user."""
        ...

    async def ask(self, recipient: Recipient, prompt: str) -> str:
        """Run a prompt through the agent for that user, as a scheduled task; the answer."""
        ...


@dataclass(frozen=True)
class Button:
    label: str
    data: str  # handed back to the feature's `press` (Telegram allows 64 bytes in all)


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


Doctor = Callable[[Host], Awaitable[list[CheckResult]]]
# A section of the newest user turn's [context] block (memory auto-recall, ...): given the
# request and the user's text, its text or None.
ContextProvider = Callable[[RequestContext, str], Awaitable[str | None]]


@dataclass(frozen=True)
class Feature:
    name: str
    settings: type[BaseModel] | None = None  # its settings slice (env var = field name)
    tools: tuple[ToolModule, ...] = ()
    models: tuple[type[Any], ...] = ()  # its tables (Alembic's metadata is their union)
    commands: tuple[Command, ...] = ()
    # Presses of the buttons its answers carry (CommandCall.args = the button's data).
    press: Callable[[CommandCall], Awaitable[Pressed]] | None = None
    jobs: tuple[Job, ...] = ()
    parts: tuple[Callable[[Host], Part], ...] = ()  # built when the adapter starts
    # Sections of every prompt's [context] block, built with the agent; a builder may
    # return None (the feature is off under these settings).
    context: tuple[Callable[[ToolDeps], ContextProvider | None], ...] = ()
    doctor: Doctor | None = None


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
