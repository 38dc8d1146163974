"""Every feature's commands and buttons (tools/feature.py), rendered for Telegram: one
handler per command, one for the buttons of all features (callback data
"<feature>:<data>"), so a feature needs no router of its own."""

from __future__ import annotations

import logging

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

from bot.app import App
from bot.telegram.chart_photo import send_png
from bot.telegram.groups import GROUP_CHATS
from bot.telegram.render import Chunk, render, send_chunk, send_plain, split_plain, with_retry
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


async def send_answer(bot: Bot, chat_id: int, feature: Feature, answer: Answer) -> None:
    """The chart first (the text under it carries the same figures), the text with its
    buttons, then the file, then the messages that follow."""
    png = await answer.chart() if answer.chart is not None else None
    if png is not None:
        await send_png(bot, chat_id, png)
    chunks: list[Chunk] = (
        render(answer.text)
        if answer.markdown
        else [(t, []) for t in split_plain(answer.text) or ["(empty)"]]
    )
    for i, (text, entities) in enumerate(chunks):  # buttons go under the last part
        markup = _markup(feature, answer) if i == len(chunks) - 1 else None
        await send_chunk(bot, chat_id, text, entities, markup)
    if answer.file is not None:
        name, content = answer.file
        document = BufferedInputFile(content, filename=name)
        await with_retry(lambda: bot.send_document(chat_id, document), "sendDocument")
    for then in answer.more:
        await send_answer(bot, chat_id, feature, then)


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
        message: Message, command: CommandObject, bot: Bot, app: App, user: ChatUser
    ) -> None:
        chat = message.chat.id
        if declared.private and message.chat.type in GROUP_CHATS:
            chat = user.telegram_id  # the private chat with the member
        call = CommandCall(app, _who(user, chat), command.args or "")
        got = await declared.run(call)
        answer = Answer(got) if isinstance(got, str) else got
        if chat == message.chat.id:
            await send_answer(bot, chat, feature, answer)
            return
        try:
            await send_answer(bot, chat, feature, answer)
        except TelegramForbiddenError:  # they never opened a chat with the bot
            await send_plain(bot, message.chat.id, private_only(declared, me=await bot.me()))
            return
        await send_plain(bot, message.chat.id, SENT_PRIVATELY.format(command=declared.name))


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
