"""/model: the models you may use (LLM_MODEL, LLM_MODELS), yours, and switching."""

from __future__ import annotations

from aiogram import Router
from aiogram.filters import CommandObject
from aiogram.types import Message

from bot.app import App
from bot.command_texts import model_reply
from bot.telegram.commands import on_command
from bot.telegram.render import send_plain


def build_router() -> Router:
    router = Router(name="model")

    @router.message(on_command("model"), flags={"command": "model"})
    async def on_model(message: Message, command: CommandObject, app: App) -> None:
        assert message.bot is not None and message.from_user is not None
        user = message.from_user
        text = await model_reply(app, user.id, user.full_name, command.args or "")
        await send_plain(message.bot, message.chat.id, text)

    return router
