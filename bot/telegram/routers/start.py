"""/start and /help."""

from __future__ import annotations

from aiogram import Router
from aiogram.filters import Command
from aiogram.types import Message

from bot.app import App
from bot.commands import APP_BY_NAME, help_lines
from bot.telegram.outbox import Outbox


def help_text(app: App) -> str:
    return (
        "I'm Sidekick, your assistant. Just write to me; I remember our conversation.\n\n"
        "Commands:\n" + "\n".join(help_lines(terminal=False, features=app.features))
    )


def on_command(name: str) -> Command:
    """Matches an app command's name and aliases in any case, as the terminal does."""
    return Command(*APP_BY_NAME[name].names, ignore_case=True)


def build_router() -> Router:
    router = Router(name="start")

    @router.message(on_command("start"), flags={"command": "start"})
    async def on_start(message: Message, app: App, outbox: Outbox) -> None:
        name = message.from_user.first_name if message.from_user else "there"
        await outbox.say(message.chat.id, f"Hi {name}! " + help_text(app))

    # Plain text: Markdown took the placeholders `<text>` and `<tool>` for HTML and dropped
    # them, so /help showed "/memory [layer | search  | forget ]".
    @router.message(on_command("help"), flags={"command": "help"})
    async def on_help(message: Message, app: App, outbox: Outbox) -> None:
        await outbox.say(message.chat.id, help_text(app))

    return router
