"""/context: the token split of the user's last request."""

from __future__ import annotations

from aiogram import Bot, Router
from aiogram.types import Message

from bot.app import App
from bot.command_texts import context_command
from bot.telegram.commands import on_command
from bot.telegram.render import send_plain
from bot.telegram.user import ChatUser, use_user


def build_router() -> Router:
    router = use_user(Router(name="tools"))

    @router.message(on_command("context"), flags={"command": "context"})
    async def on_context(message: Message, bot: Bot, app: App, user: ChatUser) -> None:
        await send_plain(bot, message.chat.id, await context_command(app, user.id, user.tz))

    return router
