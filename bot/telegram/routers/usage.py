"""/usage: tokens and cost (today, month, by model and purpose), per session, the footer."""

from __future__ import annotations

from aiogram import Router
from aiogram.filters import Command, CommandObject
from aiogram.types import Message

from bot.app import App
from bot.telegram.render import send_plain
from bot.usage.meter import Meter
from bot.usage.report import session_text, usage_text
from db.repos import core as core_repo
from db.repos import usage as repo

USAGE = "Usage: /usage, /usage session, /usage footer on|off"


async def user_id_of(app: App, message: Message) -> int:
    assert message.from_user is not None
    async with app.session_factory() as s, s.begin():
        user = await core_repo.get_or_create_user(
            s, message.from_user.id, message.from_user.full_name, app.deps.clock()
        )
        return user.id


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
    router = Router(name="usage")

    @router.message(
        Command("usage"),
        flags={"command": ("usage", "tokens and cost: today, this month, by model")},
    )
    async def on_usage(message: Message, command: CommandObject, app: App) -> None:
        assert message.bot is not None
        meter = app.agent.meter
        if meter is None:
            await send_plain(message.bot, message.chat.id, "Usage recording is off.")
            return
        user_id = await user_id_of(app, message)
        text = await usage_reply(meter, app, user_id, command.args or "")
        await send_plain(message.bot, message.chat.id, text)

    return router
