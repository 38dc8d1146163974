"""The bot's routers, one per feature, in the order aiogram tries them.

A feature's commands and buttons need no router: features.build_router renders what the
features declare (tools/feature.py). The routers here answer what is Telegram's own (media,
groups' /start, charts) and the commands of bot/commands.py's APP_COMMANDS; each
`build_router()` makes a new Router (a router can be attached to one Dispatcher only, and
tests build several), and all come BEFORE `chat.build_router()`, which catches every plain
message. A handler names its command with `flags={"command": "name"}` and filters on
`on_command("name")`.
"""

from __future__ import annotations

from aiogram import Router
from aiogram.types import BotCommand, Message

from bot.commands import commands
from bot.features import FEATURES
from bot.telegram.routers import approvals, chat, start
from bot.telegram.routers import features as features_router
from tools.feature import Feature


def build_routers(features: tuple[Feature, ...] = FEATURES) -> list[Router]:
    routers = [
        start.build_router(),
        chat.build_media_router(),  # before the features: a file's caption is not a command
        features_router.build_router(features),
        approvals.build_router(),  # approval buttons sent before approvals was a feature
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


def bot_commands(features: tuple[Feature, ...] = FEATURES) -> list[BotCommand]:
    """Telegram's command menu: every command of the shared table, in its order."""
    return [BotCommand(command=c.name, description=c.about) for c in commands(features)]


def declared_commands(routers: list[Router]) -> list[str]:
    """The command each message handler says it answers (`flags={"command": name}`)."""
    out: list[str] = []
    for router in routers:
        for r in router.chain_tail:
            out += [h.flags["command"] for h in r.message.handlers if h.flags.get("command")]
    return out
