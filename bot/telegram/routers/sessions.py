"""/newsession [name], /sessions and /timezone [IANA name]."""

from __future__ import annotations

from aiogram import Bot, Router
from aiogram.filters import CommandObject
from aiogram.types import Message

from bot.app import App
from bot.session_texts import new_session, new_session_text, sessions_text, timezone_text
from bot.telegram.commands import on_command
from bot.telegram.render import send_plain
from bot.telegram.user import ChatUser, use_user

MAX_NAME = 100


def build_router() -> Router:
    router = use_user(Router(name="sessions"))

    @router.message(on_command("newsession"), flags={"command": "newsession"})
    async def on_newsession(
        message: Message, command: CommandObject, bot: Bot, app: App, user: ChatUser
    ) -> None:
        name = (command.args or "").strip() or None
        if name is not None and len(name) > MAX_NAME:
            await send_plain(
                bot, message.chat.id, f"Session names are at most {MAX_NAME} characters."
            )
            return
        created = await new_session(app, user.telegram_id, user.name, name)
        await send_plain(bot, message.chat.id, new_session_text(created))

    @router.message(on_command("sessions"), flags={"command": "sessions"})
    async def on_sessions(message: Message, bot: Bot, app: App, user: ChatUser) -> None:
        text = await sessions_text(app, user.telegram_id, user.name)
        await send_plain(bot, message.chat.id, text)

    @router.message(on_command("timezone"), flags={"command": "timezone"})
    async def on_timezone(
        message: Message, command: CommandObject, bot: Bot, app: App, user: ChatUser
    ) -> None:
        text = await timezone_text(app, user.telegram_id, user.name, command.args or "")
        await send_plain(bot, message.chat.id, text)

    return router
