"""/codestats [days], /codefailures [n], and the button that sends a run as a file."""

from __future__ import annotations

import logging
from zoneinfo import ZoneInfo

from aiogram import F, Router
from aiogram.exceptions import TelegramAPIError
from aiogram.filters import Command, CommandObject
from aiogram.types import (
    BufferedInputFile,
    CallbackQuery,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    Message,
    MessageEntity,
)

from bot.app import App
from bot.telegram.render import send_chunk, send_plain, with_retry
from db.models.core import User
from db.repos import code as repo
from db.repos import core as core_repo
from tools.code import report

CALLBACK_PREFIX = "codefile:"
log = logging.getLogger(__name__)


def _tz(user: User, app: App) -> ZoneInfo:
    return app.settings.session_policy.zone(user.timezone)


async def _send(message: Message, r: report.Rendered, markup: InlineKeyboardMarkup | None) -> None:
    assert message.bot is not None
    entities = [MessageEntity(**e) for e in r.entities]
    await send_chunk(message.bot, message.chat.id, r.text, entities, markup)


def _file_button(execution_id: int) -> InlineKeyboardMarkup:
    button = InlineKeyboardButton(
        text="📄 Full code + output as a file", callback_data=f"{CALLBACK_PREFIX}{execution_id}"
    )
    return InlineKeyboardMarkup(inline_keyboard=[[button]])


def build_router() -> Router:
    router = Router(name="code")

    @router.message(
        Command("codestats"),
        flags={"command": ("codestats", "[days] your code runs: successes, failures, timing")},
    )
    async def on_codestats(message: Message, command: CommandObject, app: App) -> None:
        assert message.bot is not None and message.from_user is not None
        days = report.parse_bounded(command.args, 7, report.MAX_DAYS)
        if days is None:
            await send_plain(message.bot, message.chat.id, report.STATS_USAGE)
            return
        now = app.deps.clock()
        async with app.session_factory() as s, s.begin():
            who = message.from_user
            user = await core_repo.get_or_create_user(s, who.id, who.full_name, now)
            st = await repo.stats(s, user.id, report.window_start(now, days))
        await _send(message, report.stats_message(st, days), None)

    @router.message(
        Command("codefailures"),
        flags={"command": ("codefailures", "[n] your last failed code runs, with code and errors")},
    )
    async def on_codefailures(message: Message, command: CommandObject, app: App) -> None:
        assert message.bot is not None and message.from_user is not None
        n = report.parse_bounded(command.args, 5, report.MAX_FAILURES)
        if n is None:
            await send_plain(message.bot, message.chat.id, report.FAILURES_USAGE)
            return
        now = app.deps.clock()
        async with app.session_factory() as s, s.begin():
            who = message.from_user
            user = await core_repo.get_or_create_user(s, who.id, who.full_name, now)
            rows = await repo.last_failures(s, user.id, n)
            tz = _tz(user, app)
        for r in report.failures_messages(rows, tz):
            markup = _file_button(r.execution_id) if r.execution_id is not None else None
            await _send(message, r, markup)

    @router.callback_query(F.data.startswith(CALLBACK_PREFIX))
    async def on_file(query: CallbackQuery, app: App) -> None:
        assert query.bot is not None and query.data is not None
        raw = query.data.removeprefix(CALLBACK_PREFIX)
        now = app.deps.clock()
        row = None
        if raw.isdigit():
            async with app.session_factory() as s, s.begin():
                who = query.from_user
                user = await core_repo.get_or_create_user(s, who.id, who.full_name, now)
                row = await repo.get_execution(s, int(raw), user.id)
                tz = _tz(user, app)
        if row is None:
            await query.answer("That run is not in your history.", show_alert=True)
            return
        name, data = report.full_report(row, tz)
        chat_id = query.message.chat.id if query.message is not None else query.from_user.id
        bot = query.bot
        try:
            await with_retry(
                lambda: bot.send_document(chat_id, BufferedInputFile(data, filename=name)),
                "sendDocument",
            )
        except TelegramAPIError as exc:
            log.warning("sending run #%s as a file failed: %s", row.id, exc)
            await query.answer("Telegram did not take the file; try again later.", show_alert=True)
            return
        await query.answer()

    return router
