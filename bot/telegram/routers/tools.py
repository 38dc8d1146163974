"""/tools: what the model can use, and what it costs."""

from __future__ import annotations

from aiogram import Bot, Router
from aiogram.types import Message

from bot.app import App
from bot.command_texts import tools_command
from bot.telegram.commands import on_command
from bot.telegram.render import send_plain
from bot.telegram.user import ChatUser, use_user


def build_router() -> Router:
    router = use_user(Router(name="tools"))

    @router.message(on_command("tools"), flags={"command": "tools"})
    async def on_tools(message: Message, bot: Bot, app: App, user: ChatUser) -> None:
        await send_plain(bot, message.chat.id, tools_command(app, user.id))

    return router
