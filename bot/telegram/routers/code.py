"""/codestats [days], /codefailures [n], and the button that sends a run as a file."""

from __future__ import annotations

import logging

from aiogram import Bot, Router
from aiogram.exceptions import TelegramAPIError
from aiogram.filters import CommandObject
from aiogram.filters.callback_data import CallbackData
from aiogram.types import (
    BufferedInputFile,
    CallbackQuery,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    Message,
    MessageEntity,
)

from bot.app import App
from bot.telegram.chart_photo import send_chart
from bot.telegram.commands import on_command
from bot.telegram.render import send_chunk, send_plain, with_retry
from bot.telegram.user import ChatUser, use_user
from tools.code import commands as report
from tools.code import repo

log = logging.getLogger(__name__)


class RunFile(CallbackData, prefix="codefile"):
    """The button under a failure: send that run (code, stdout, stderr) as a file."""

    execution_id: int


async def _send(
    bot: Bot, chat_id: int, r: report.Rendered, markup: InlineKeyboardMarkup | None
) -> None:
    entities = [MessageEntity(**e) for e in r.entities]
    await send_chunk(bot, chat_id, r.text, entities, markup)


def _file_button(execution_id: int) -> InlineKeyboardMarkup:
    button = InlineKeyboardButton(
        text="📄 Full code + output as a file",
        callback_data=RunFile(execution_id=execution_id).pack(),
    )
    return InlineKeyboardMarkup(inline_keyboard=[[button]])


def build_router() -> Router:
    router = use_user(Router(name="code"))

    @router.message(on_command("codestats"), flags={"command": "codestats"})
    async def on_codestats(
        message: Message, command: CommandObject, bot: Bot, app: App, user: ChatUser
    ) -> None:
        days = report.parse_bounded(command.args, 7, report.MAX_DAYS)
        if days is None:
            await send_plain(bot, message.chat.id, report.STATS_USAGE)
            return
        now = app.deps.clock()
        async with app.session_factory() as s:
            since = report.window_start(now, days)
            st = await repo.stats(s, user.id, since)
            runs = await repo.code_runs(s, user.id, since)
        await send_chart(bot, message.chat.id, report.runs_series(runs, now, user.tz, days))
        await _send(bot, message.chat.id, report.stats_message(st, days), None)

    @router.message(on_command("codefailures"), flags={"command": "codefailures"})
    async def on_codefailures(
        message: Message, command: CommandObject, bot: Bot, app: App, user: ChatUser
    ) -> None:
        n = report.parse_bounded(command.args, 5, report.MAX_FAILURES)
        if n is None:
            await send_plain(bot, message.chat.id, report.FAILURES_USAGE)
            return
        async with app.session_factory() as s:
            rows = await repo.last_failures(s, user.id, n)
        for r in report.failures_messages(rows, user.tz):
            markup = _file_button(r.execution_id) if r.execution_id is not None else None
            await _send(bot, message.chat.id, r, markup)

    @router.callback_query(RunFile.filter())
    async def on_file(
        query: CallbackQuery, callback_data: RunFile, bot: Bot, app: App, user: ChatUser
    ) -> None:
        async with app.session_factory() as s:
            row = await repo.get_execution(s, callback_data.execution_id, user.id)
        if row is None:
            await query.answer("That run is not in your history.", show_alert=True)
            return
        name, data = report.full_report(row, user.tz)
        chat_id = query.message.chat.id if query.message is not None else query.from_user.id
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
