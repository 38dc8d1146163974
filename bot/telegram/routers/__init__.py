"""The bot's routers, one per feature, in the order aiogram tries them.

A feature's commands and buttons need no router: features.build_router renders what the
features declare (tools/feature.py). The routers here answer what is Telegram's own (media,
groups' /start, charts) and the commands of bot/commands.py's APP_COMMANDS; each
`build_router()` makes a new Router (a router can be attached to one Dispatcher only, and
tests build several). A plain text message (no "/" in front), most of what comes, goes to
the first router, `chat.build_text_router()`, and meets no command's filter on its way;
everything else tries the others in order, and what none answers (a command nobody
declares, a sticker, a stale button) reaches `chat.build_router()`, the last. A handler
names its command with `flags={"command": "name"}` and filters on `on_command("name")`.
"""

from __future__ import annotations

from aiogram import Router
from aiogram.types import BotCommand

from bot.commands import commands
from bot.features import FEATURES
from bot.telegram.routers import approvals, chat, start
from bot.telegram.routers import features as features_router
from tools.feature import Feature


def build_routers(features: tuple[Feature, ...] = FEATURES) -> list[Router]:
    return [
        chat.build_text_router(),  # first: a plain message is answered without the rest
        start.build_router(),
        chat.build_media_router(),  # before the features: a file's caption is not a command
        features_router.build_router(features),
        approvals.build_router(),  # approval buttons sent before approvals was a feature
        # Feature routers go here, above the catch-all.
        chat.build_router(),  # catch-all: keep it LAST
    ]


def bot_commands(features: tuple[Feature, ...] = FEATURES) -> list[BotCommand]:
    """Telegram's command menu: every command of the shared table, in its order."""
    return [BotCommand(command=c.name, description=c.about) for c in commands(features)]
