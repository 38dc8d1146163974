"""The bot's routers, one per feature, in the order aiogram tries them.

To add a feature: write `bot/telegram/routers/<feature>.py` with `build_router() -> Router`
(a new Router each call: a router can only be attached to one Dispatcher, and tests build
several), and add one line to `build_routers` BEFORE `chat.build_router()`, which catches
every plain message. A command handler registered with
`flags={"command": ("name", "what it does")}` shows up in /help and in Telegram's menu.
"""

from __future__ import annotations

from aiogram import Router
from aiogram.filters import Command
from aiogram.types import BotCommand, Message

from bot.telegram.routers import (
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
        # Feature routers go here, above the catch-all.
        chat.build_router(),  # catch-all for plain messages: keep it LAST
    ]
    for router in routers:
        _commands_only(router)
    return routers


def _commands_only(router: Router) -> None:
    """A router whose message handlers all need a command gets one cheap check in front:
    without it every plain message went through each Command filter (~15), each splitting
    the text and raising and catching an exception to say no. The check passes whatever
    any of them could accept (text or caption holding one of their prefixes), so which
    handler runs does not change."""
    handlers = router.message.handlers
    if not handlers or router.sub_routers:
        return
    prefixes: set[str] = set()
    for handler in handlers:
        commands = [f.callback for f in handler.filters or () if isinstance(f.callback, Command)]
        if not commands:
            return
        prefixes.update(*(command.prefix for command in commands))

    # Async on purpose, like chat.has_text: sync filters run in a worker thread.
    async def may_be_command(message: Message) -> bool:
        text = message.text or message.caption
        if not text:
            return False
        return any(prefix in text for prefix in prefixes)

    router.message.filter(may_be_command)


def bot_commands(routers: list[Router]) -> list[BotCommand]:
    """Every command declared with the `command` flag, in router order."""
    out: list[BotCommand] = []
    for router in routers:
        for r in router.chain_tail:
            for handler in r.message.handlers:
                declared = handler.flags.get("command")
                if declared:
                    name, description = declared
                    out.append(BotCommand(command=name, description=description))
    return out
