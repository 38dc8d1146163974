"""/tools (what the model can use, and what it costs) and /context (last request's split)."""

from __future__ import annotations

from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from aiogram import Router
from aiogram.filters import Command
from aiogram.types import Message

from bot.app import App
from bot.telegram.render import send_plain
from bot.usage.report import last_request_line
from db.repos import core as core_repo
from tools.discovery.report import context_text, tools_text
from tools.extensions import discovery, mcp_manager


async def _user(app: App, message: Message) -> tuple[int, ZoneInfo]:
    assert message.from_user is not None
    async with app.session_factory() as s, s.begin():
        user = await core_repo.get_or_create_user(
            s, message.from_user.id, message.from_user.full_name, app.deps.clock()
        )
        try:
            tz = ZoneInfo(user.timezone) if user.timezone else app.settings.tz
        except (ZoneInfoNotFoundError, ValueError):
            tz = app.settings.tz
        return user.id, tz


def build_router() -> Router:
    router = Router(name="tools")

    @router.message(
        Command("tools"), flags={"command": ("tools", "the tools I can use and their token cost")}
    )
    async def on_tools(message: Message, app: App) -> None:
        assert message.bot is not None
        disc = discovery(app.registry)
        if disc is None:
            text = "Tools: " + ", ".join(app.registry.names())
        else:
            user_id, _ = await _user(app, message)
            text = tools_text(disc, user_id, mcp_manager(app.registry))
        await send_plain(message.bot, message.chat.id, text)

    @router.message(
        Command("context"),
        flags={"command": ("context", "token split of your last request")},
    )
    async def on_context(message: Message, app: App) -> None:
        assert message.bot is not None
        disc = discovery(app.registry)
        if disc is None:
            await send_plain(message.bot, message.chat.id, "Context accounting is off.")
            return
        user_id, tz = await _user(app, message)
        text = context_text(disc, user_id, tz)
        if app.agent.meter is not None:  # the same line /usage shows: they must agree
            last = await last_request_line(app.agent.meter, user_id)
            text += f"\n{last}" if last else ""
        await send_plain(message.bot, message.chat.id, text)

    return router
