"""/usage: tokens and cost (today, month, by model and purpose), per session, the footer."""

from __future__ import annotations

from datetime import timedelta

from aiogram import Bot, Router
from aiogram.filters import Command, CommandObject
from aiogram.types import Message

from bot.app import App
from bot.charts import usage_series
from bot.telegram.chart_photo import send_chart
from bot.telegram.render import send_plain
from bot.telegram.user import ChatUser, use_user
from bot.usage.meter import Meter
from bot.usage.report import session_text, usage_text
from db.repos import charts as charts_repo
from db.repos import usage as repo

USAGE = "Usage: /usage, /usage session, /usage footer on|off"
CHART_DAYS = 14


async def usage_reply(meter: Meter, app: App, user_id: int, args: str) -> str:
    words = args.lower().split()
    if not words:
        return await usage_text(meter, user_id)
    if words == ["session"]:
        return await session_text(meter, user_id)
    if len(words) == 2 and words[0] == "footer" and words[1] in ("on", "off"):
        async with app.session_factory() as s, s.begin():
            await repo.set_footer(s, user_id, words[1] == "on")
        if words[1] == "on":
            return "From now on each answer ends with its tokens and cost."
        return "The usage footer is off."
    return USAGE


def build_router() -> Router:
    router = use_user(Router(name="usage"))

    @router.message(
        Command("usage"),
        flags={"command": ("usage", "tokens and cost: today, this month, by model")},
    )
    async def on_usage(
        message: Message, command: CommandObject, bot: Bot, app: App, user: ChatUser
    ) -> None:
        meter = app.agent.meter
        if meter is None:
            await send_plain(bot, message.chat.id, "Usage recording is off.")
            return
        if not (command.args or "").strip():
            now = meter.clock()
            since = now - timedelta(days=CHART_DAYS)
            async with app.session_factory() as s:
                rows = await charts_repo.usage_rows(s, user.id, since)
            series = usage_series(rows, now, meter.tz, CHART_DAYS)
            await send_chart(bot, message.chat.id, series)
        text = await usage_reply(meter, app, user.id, command.args or "")
        await send_plain(bot, message.chat.id, text)

    return router
