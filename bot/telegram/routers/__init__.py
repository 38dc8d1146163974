"""The bot's routers, one per feature, in the order aiogram tries them.

To add a feature: write `bot/telegram/routers/<feature>.py` with `build_router() -> Router`
(a new Router each call: a router can only be attached to one Dispatcher, and tests build
several), and add one line to `build_routers` BEFORE `chat.build_router()`, which catches
every plain message. Commands are declared once in bot/commands.py (menu, /help, aliases);
a handler names its row with `flags={"command": "name"}` and filters on
`on_command("name")`.
"""

from __future__ import annotations

from aiogram import Router
from aiogram.types import BotCommand, Message

from bot.commands import COMMANDS
from bot.telegram.routers import (
    approvals,
    chat,
    code,
    media,
    memory,
    model,
    reminders,
    sessions,
    start,
    usage,
    voice,
)
from bot.telegram.routers import tools as tools_router


def build_routers() -> list[Router]:
    routers = [
        start.build_router(),
        sessions.build_router(),
        code.build_router(),
        tools_router.build_router(),
        memory.build_router(),
        media.build_router(),
        usage.build_router(),
        model.build_router(),
        reminders.build_router(),
        voice.build_router(),
        approvals.build_router(),
        # Feature routers go here, above the catch-all.
        chat.build_router(),  # catch-all for plain messages: keep it LAST
    ]
    for router in routers:
        _commands_only(router)
    return routers


def _commands_only(router: Router) -> None:
    """A router whose message handlers all answer commands gets one cheap check in front:
    without it every plain message went through each Command filter, each splitting
    the text and raising and catching an exception to say no. A command is a text or
    caption starting with "/" (aiogram's default prefix, the only one we use), so which
    handler runs does not change. Which handlers answer commands is what they declare
    (`flags={"command": ...}`), not read back out of aiogram's filters."""
    handlers = router.message.handlers
    if not handlers or router.sub_routers:
        return
    if not all(handler.flags.get("command") for handler in handlers):
        return

    # Async on purpose, like chat.has_text: sync filters run in a worker thread.
    async def may_be_command(message: Message) -> bool:
        text = message.text or message.caption
        return text is not None and text.startswith("/")

    router.message.filter(may_be_command)


def bot_commands() -> list[BotCommand]:
    """Telegram's command menu: every command of the shared table, in its order."""
    return [BotCommand(command=c.name, description=c.about) for c in COMMANDS]


def declared_commands(routers: list[Router]) -> list[str]:
    """The command each message handler says it answers (`flags={"command": name}`)."""
    out: list[str] = []
    for router in routers:
        for r in router.chain_tail:
            out += [h.flags["command"] for h in r.message.handlers if h.flags.get("command")]
    return out
