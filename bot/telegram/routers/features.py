"""Every feature's commands and buttons (tools/feature.py), rendered for Telegram: one
handler per command, one for the buttons of all features (callback data
"<feature>:<data>"), so a feature needs no router of its own."""

from __future__ import annotations

import logging
from dataclasses import replace

from aiogram import Bot, F, Router
from aiogram.exceptions import TelegramAPIError, TelegramForbiddenError
from aiogram.filters import Command as CommandFilter
from aiogram.filters import CommandObject
from aiogram.types import (
    BufferedInputFile,
    CallbackQuery,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    Message,
    User,
)

from bot import heap
from bot.app import App
from bot.telegram.groups import GROUP_CHATS
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
    outbox: Outbox,
    chat_id: int,
    feature: Feature,
    answer: Answer,
    about: int | None = None,
    *,
    forbidden_raises: bool = False,
) -> None:
    """A command's reply, through the outbox: in the chat's order, and kept through a
    Telegram outage (charts, buttons and files too). `forbidden_raises`: a chat closed to
    the bot raises TelegramForbiddenError (a private reply to a group member) instead of
    being logged."""
    items = await answer_items(feature, answer)
    await outbox.send(chat_id, about, items, forbidden_raises=forbidden_raises)


SENT_PRIVATELY = "I sent the answer to /{command} to you in a private chat: it is yours alone."


def private_only(declared: Command, me: User) -> str:
    """The group's reply when the member's private chat is closed to the bot."""
    where = f"@{me.username}" if me.username else "me"
    return (
        f"/{declared.name} shows what is private to you, so I answer it only in a private "
        f"chat, and I cannot write to you there yet: open a chat with {where}, press Start, "
        f"and send /{declared.name} there."
    )


def _who(user: ChatUser, chat_id: int) -> Who:
    return Who(user.id, user.telegram_id, user.name, user.tz, chat_id)


def _answer_command(router: Router, feature: Feature, declared: Command) -> None:
    matches = CommandFilter(*declared.names, ignore_case=True)

    @router.message(matches, flags={"command": declared.name})
    async def on_command_message(
        message: Message,
        command: CommandObject,
        bot: Bot,
        app: App,
        user: ChatUser,
        outbox: Outbox,
    ) -> None:
        chat = message.chat.id
        if declared.private and message.chat.type in GROUP_CHATS:
            chat = user.telegram_id  # the private chat with the member
        call = CommandCall(app, _who(user, chat), command.args or "")
        got = await declared.run(call)
        answer = Answer(got) if isinstance(got, str) else got
        if chat == message.chat.id:
            await send_answer(outbox, chat, feature, answer, message.message_id)
            return
        try:
            await send_answer(outbox, chat, feature, answer, forbidden_raises=True)
            said = SENT_PRIVATELY.format(command=declared.name)
        except TelegramForbiddenError:  # they never opened a chat with the bot
            said = private_only(declared, me=await bot.me())
        await outbox.send(message.chat.id, message.message_id, text_items([said]))


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
