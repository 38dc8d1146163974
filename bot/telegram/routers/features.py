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
    Message,
    User,
)

from bot.app import App
from bot.shown import shown
from bot.telegram.groups import GROUP_CHATS
from bot.telegram.outbox import Outbox, text_items
from bot.telegram.render import with_retry
from bot.telegram.replies import markup, send_answer
from bot.telegram.user import ChatUser, use_user
from tools.feature import Answer, Command, CommandCall, Feature, Who

log = logging.getLogger(__name__)


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
    press = feature.adds.press
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
        await query.answer(shown(pressed.toast), show_alert=pressed.alert)
        if pressed.answer is not None and pressed.answer.text and query.message is not None:
            await bot.edit_message_text(
                shown(pressed.answer.text),
                chat_id=query.message.chat.id,
                message_id=query.message.message_id,
                reply_markup=markup(feature, pressed.answer),
            )


def build_router(features: tuple[Feature, ...]) -> Router:
    router = use_user(Router(name="features"))
    for feature in features:
        for command in feature.adds.commands:
            _answer_command(router, feature, command)
        _answer_presses(router, feature)
    return router
