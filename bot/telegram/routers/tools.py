"""/tools (what the model can use, and what it costs) and /context (last request's split)."""

from __future__ import annotations

from aiogram import Bot, Router
from aiogram.filters import Command
from aiogram.types import Message

from bot.app import App
from bot.telegram.render import send_plain
from bot.telegram.user import ChatUser, use_user
from bot.usage.report import last_request_line
from tools.discovery.report import context_text, tools_text
from tools.registry import discovery, mcp_manager


def build_router() -> Router:
    router = use_user(Router(name="tools"))

    @router.message(
        Command("tools"), flags={"command": ("tools", "the tools I can use and their token cost")}
    )
    async def on_tools(message: Message, bot: Bot, app: App, user: ChatUser) -> None:
        disc = discovery(app.registry)
        if disc is None:
            text = "Tools: " + ", ".join(app.registry.names())
        else:
            text = tools_text(disc, user.id, mcp_manager(app.registry))
        await send_plain(bot, message.chat.id, text)

    @router.message(
        Command("context"),
        flags={"command": ("context", "token split of your last request")},
    )
    async def on_context(message: Message, bot: Bot, app: App, user: ChatUser) -> None:
        disc = discovery(app.registry)
        if disc is None:
            await send_plain(bot, message.chat.id, "Context accounting is off.")
            return
        text = context_text(disc, user.id, user.tz)
        if app.agent.meter is not None:  # the same line /usage shows: they must agree
            last = await last_request_line(app.agent.meter, user.id)
            text += f"\n{last}" if last else ""
        await send_plain(bot, message.chat.id, text)

    return router
