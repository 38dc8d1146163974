"""The terminal chat's slash commands, answered locally like the Telegram bot's commands.

Each returns the text to print, or None when the line is not one of ours (it then goes to
the model, as in Telegram, where only known commands are intercepted).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from bot.app import App
from bot.session_texts import new_session, new_session_text, sessions_text, timezone_text
from db.repos import core as core_repo
from tools.discovery.report import tools_text
from tools.memory.store import LAYERS, MemoryHit
from tools.registry import discovery, mcp_manager

MEMORY_USAGE = (
    "Usage: /memory [long|mid|short|session] · /memory search <text> · /memory forget <id>"
)
MEMORY_PAGE = 10


@dataclass(frozen=True)
class Who:
    """The terminal user: a local user of their own, or (chat --as) a Telegram user."""

    telegram_user_id: int | None
    name: str


Handler = Callable[[App, Who, str], Awaitable[str]]


async def _user_id(app: App, who: Who) -> int:
    async with app.session_factory() as s, s.begin():
        user = await core_repo.get_or_create_user(
            s, who.telegram_user_id, who.name, app.deps.clock()
        )
        return user.id


async def cmd_help(app: App, who: Who, arg: str) -> str:
    lines = [f"/{name} — {about}" for name, (about, _) in COMMANDS.items()]
    lines.append("/quit — leave (or Ctrl-D; Ctrl-C leaves at once)")
    return "Anything else you type goes to the assistant.\n\n" + "\n".join(lines)


async def cmd_new(app: App, who: Who, arg: str) -> str:
    created = await new_session(app, who.telegram_user_id, who.name, arg.strip() or None)
    return new_session_text(created)


async def cmd_sessions(app: App, who: Who, arg: str) -> str:
    return await sessions_text(app, who.telegram_user_id, who.name)


async def cmd_timezone(app: App, who: Who, arg: str) -> str:
    return await timezone_text(app, who.telegram_user_id, who.name, arg)


async def cmd_tools(app: App, who: Who, arg: str) -> str:
    disc = discovery(app.registry)
    if disc is None:
        return "Tools: " + ", ".join(app.registry.names())
    return tools_text(disc, await _user_id(app, who), mcp_manager(app.registry))


def _memory_line(h: MemoryHit) -> str:
    content = h.content if len(h.content) <= 300 else h.content[:299] + "…"
    cat = f" · {h.category}" if h.category else ""
    return f"#{h.id} [{h.layer}{cat}] {content}\n    from {h.source()}"


async def cmd_memory(app: App, who: Who, arg: str) -> str:
    store = app.deps.memory
    if store is None:
        return "Memory is not available."
    user_id = await _user_id(app, who)
    verb, _, rest = arg.strip().partition(" ")
    verb, rest = verb.lower(), rest.strip()
    if verb in ("", *LAYERS):
        layer = verb or "long"
        found = await store.page(user_id=user_id, layer=layer, limit=MEMORY_PAGE)
        if not found.items:
            return f"No {layer} memories. Other layers: {', '.join(LAYERS)}."
        head = f"{layer} memories ({len(found.items)} of {found.total}):"
        return "\n\n".join([head, *(_memory_line(h) for h in found.items)])
    if verb == "search" and rest:
        hits = await store.recall(user_id=user_id, query=rest, limit=10)
        return "\n\n".join(_memory_line(h) for h in hits) if hits else "Nothing matches."
    if verb == "forget" and rest.lstrip("#").isdigit():
        mid = int(rest.lstrip("#"))
        ok = await store.forget(user_id=user_id, memory_id=mid)
        return f"Forgot #{mid}." if ok else f"There is no memory #{mid}."
    return MEMORY_USAGE


COMMANDS: dict[str, tuple[str, Handler]] = {
    "help": ("list the commands", cmd_help),
    "new": ("[name] end this conversation and start a new one", cmd_new),
    "sessions": ("your recent sessions with their summaries", cmd_sessions),
    "memory": ("what I remember about you: list, search <text>, forget <id>", cmd_memory),
    "tools": ("the tools I can use and their token cost", cmd_tools),
    "timezone": ("[Area/City] show or set your time zone", cmd_timezone),
}
ALIASES = {"newsession": "new", "start": "help"}


async def run_command(app: App, who: Who, line: str) -> str | None:
    """The reply to a slash command, or None when `line` is not one."""
    if not line.startswith("/"):
        return None
    word, _, arg = line[1:].partition(" ")
    word = ALIASES.get(word.lower(), word.lower())
    if word not in COMMANDS:
        return None
    return await COMMANDS[word][1](app, who, arg)
