"""/start and /help."""

from __future__ import annotations

from aiogram import Bot, Router
from aiogram.filters import Command, CommandStart
from aiogram.types import BotCommand, Message

from bot.telegram.render import send_markdown


def help_text(commands: list[BotCommand]) -> str:
    lines = [f"/{c.command} — {c.description}" for c in commands]
    return (
        "I'm Sidekick, your assistant. Just write to me; I remember our conversation.\n\n"
        "Commands:\n" + "\n".join(lines)
    )


def build_router() -> Router:
    router = Router(name="start")

    @router.message(CommandStart(), flags={"command": ("start", "say hello")})
    async def on_start(message: Message, bot: Bot, commands: list[BotCommand]) -> None:
        name = message.from_user.first_name if message.from_user else "there"
        await send_markdown(bot, message.chat.id, f"Hi {name}! " + help_text(commands))

    @router.message(Command("help"), flags={"command": ("help", "list the commands")})
    async def on_help(message: Message, bot: Bot, commands: list[BotCommand]) -> None:
        await send_markdown(bot, message.chat.id, help_text(commands))

    return router
