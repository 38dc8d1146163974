"""/usage: tokens and cost (today, month, by model and purpose), per session, the footer."""

from __future__ import annotations

from aiogram import Bot, Router
from aiogram.filters import CommandObject
from aiogram.types import Message

from bot.app import App
from bot.command_texts import usage_command
from bot.telegram.commands import on_command
from bot.telegram.render import send_plain
from bot.telegram.user import ChatUser, use_user


def build_router() -> Router:
    router = use_user(Router(name="usage"))

    @router.message(on_command("usage"), flags={"command": "usage"})
    async def on_usage(
        message: Message, command: CommandObject, bot: Bot, app: App, user: ChatUser
    ) -> None:
        text = await usage_command(app, user.id, command.args or "")
        await send_plain(bot, message.chat.id, text)

    return router
