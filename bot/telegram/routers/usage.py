"""/usage: tokens and cost (today, month, by model and purpose), per session, the footer."""

from __future__ import annotations

from datetime import timedelta

from aiogram import Bot, Router
from aiogram.filters import CommandObject
from aiogram.types import Message

from bot.app import App
from bot.command_texts import usage_command
from bot.telegram.chart_photo import send_chart
from bot.telegram.commands import on_command
from bot.telegram.render import send_plain
from bot.telegram.user import ChatUser, use_user
from db.repos import charts as charts_repo
from tools.charts import usage_series

CHART_DAYS = 14


def build_router() -> Router:
    router = use_user(Router(name="usage"))

    @router.message(on_command("usage"), flags={"command": "usage"})
    async def on_usage(
        message: Message, command: CommandObject, bot: Bot, app: App, user: ChatUser
    ) -> None:
        meter = app.agent.meter
        if meter is not None and not (command.args or "").strip():
            now = meter.clock()
            since = now - timedelta(days=CHART_DAYS)
            async with app.session_factory() as s:
                rows = await charts_repo.usage_rows(s, user.id, since)
            await send_chart(bot, message.chat.id, usage_series(rows, now, meter.tz, CHART_DAYS))
        text = await usage_command(app, user.id, command.args or "")
        await send_plain(bot, message.chat.id, text)

    return router
