"""/newsession [name]: end the current conversation and start a new (named) one."""

from __future__ import annotations

from aiogram import Router
from aiogram.filters import Command, CommandObject
from aiogram.types import Message

from bot.agent.sessions import NewSession, start_new_session
from bot.app import App
from bot.telegram.render import send_plain

MAX_NAME = 100


async def new_session(
    app: App, telegram_user_id: int, user_name: str, name: str | None
) -> NewSession:
    """The one place the bot starts a new session (archiving hooks belong here)."""
    return await start_new_session(
        app.session_factory,
        app.deps.clock,
        telegram_user_id=telegram_user_id,
        user_name=user_name,
        name=name,
    )


def build_router() -> Router:
    router = Router(name="sessions")

    @router.message(
        Command("newsession"),
        flags={"command": ("newsession", "[name] end this conversation and start a new one")},
    )
    async def on_newsession(message: Message, command: CommandObject, app: App) -> None:
        assert message.bot is not None and message.from_user is not None
        name = (command.args or "").strip() or None
        if name is not None and len(name) > MAX_NAME:
            await send_plain(
                message.bot, message.chat.id, f"Session names are at most {MAX_NAME} characters."
            )
            return
        created = await new_session(app, message.from_user.id, message.from_user.full_name, name)
        text = f"Started a new session: {created.name}."
        if created.ended_session_id is not None:
            text += " The previous conversation is closed; I start fresh from here."
        await send_plain(message.bot, message.chat.id, text)

    return router
