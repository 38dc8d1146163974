"""Every feature's commands and buttons (tools/feature.py), rendered for Telegram: one
handler per command, one for the buttons of all features (callback data
"<feature>:<data>"), so a feature needs no router of its own."""

from __future__ import annotations

import logging
from dataclasses import replace

from aiogram import Bot, F, Router
from aiogram.exceptions import TelegramAPIError
from aiogram.filters import Command as CommandFilter
from aiogram.filters import CommandObject
from aiogram.types import (
    BufferedInputFile,
    CallbackQuery,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    Message,
)

from bot import heap
from bot.app import App
from bot.telegram.outbox import Item, Outbox, text_items
from bot.telegram.render import Chunk, render, split_plain, with_retry
from bot.telegram.user import ChatUser, use_user
from tools.feature import Answer, Command, CommandCall, Feature, Who, button_data

log = logging.getLogger(__name__)


def _markup(feature: Feature, answer: Answer) -> InlineKeyboardMarkup | None:
    if not answer.buttons:
        return None
    rows = [
        [
            InlineKeyboardButton(text=b.label, callback_data=button_data(feature, b.data))
            for b in row
        ]
        for row in answer.buttons
    ]
    return InlineKeyboardMarkup(inline_keyboard=rows)


async def answer_items(feature: Feature, answer: Answer) -> list[Item]:
    """The chart first (the text under it carries the same figures), the text with its
    buttons, then the file, then the messages that follow."""
    items: list[Item] = []
    png = await answer.chart() if answer.chart is not None else None
    if png is not None:
        items.append(Item("photo", data=png, filename="chart.png"))
        heap.trim()  # the render's buffers are freed but stay mapped until trimmed
    chunks: list[Chunk] = (
        render(answer.text)
        if answer.markdown
        else [(t, []) for t in split_plain(answer.text) or ["(empty)"]]
    )
    texts = text_items(chunks)
    texts[-1] = replace(texts[-1], markup=_markup(feature, answer))  # buttons under the last
    items += texts
    if answer.file is not None:
        name, content = answer.file
        items.append(Item("document", data=content, filename=name))
    for then in answer.more:
        items += await answer_items(feature, then)
    return items


async def send_answer(
    outbox: Outbox, chat_id: int, feature: Feature, answer: Answer, about: int | None = None
) -> None:
    """A command's reply, through the outbox: in the chat's order, and kept through a
    Telegram outage (charts, buttons and files too)."""
    await outbox.send(chat_id, about, await answer_items(feature, answer))


def _who(user: ChatUser, chat_id: int) -> Who:
    return Who(user.id, user.telegram_id, user.name, user.tz, chat_id)


def _answer_command(router: Router, feature: Feature, declared: Command) -> None:
    matches = CommandFilter(*declared.names, ignore_case=True)

    @router.message(matches, flags={"command": declared.name})
    async def on_command_message(
        message: Message, command: CommandObject, app: App, user: ChatUser, outbox: Outbox
    ) -> None:
        call = CommandCall(app, _who(user, message.chat.id), command.args or "")
        got = await declared.run(call)
        answer = Answer(got) if isinstance(got, str) else got
        await send_answer(outbox, message.chat.id, feature, answer, message.message_id)


def _answer_presses(router: Router, feature: Feature) -> None:
    press = feature.press
    if press is None:
        return

    @router.callback_query(F.data.startswith(f"{feature.name}:"))
    async def on_press(query: CallbackQuery, bot: Bot, app: App, user: ChatUser) -> None:
        data = (query.data or "").split(":", 1)[1]
        chat_id = query.message.chat.id if query.message is not None else user.telegram_id
        pressed = await press(CommandCall(app, _who(user, chat_id), data))
        if pressed.answer is not None and pressed.answer.file is not None:
            name, content = pressed.answer.file
            document = BufferedInputFile(content, filename=name)
            try:  # before the toast, which then tells a refusal
                await with_retry(lambda: bot.send_document(chat_id, document), "sendDocument")
            except TelegramAPIError as exc:
                log.warning("sending %s after a button press failed: %s", name, exc)
                await query.answer(
                    "Telegram did not take the file; try again later.", show_alert=True
                )
                return
        await query.answer(pressed.toast, show_alert=pressed.alert)
        if pressed.answer is not None and pressed.answer.text and query.message is not None:
            await bot.edit_message_text(
                pressed.answer.text,
                chat_id=query.message.chat.id,
                message_id=query.message.message_id,
                reply_markup=_markup(feature, pressed.answer),
            )


def build_router(features: tuple[Feature, ...]) -> Router:
    router = use_user(Router(name="features"))
    for feature in features:
        for command in feature.commands:
            _answer_command(router, feature, command)
        _answer_presses(router, feature)
    return router
