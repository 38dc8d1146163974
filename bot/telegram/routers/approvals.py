"""Buttons sent before approvals became a feature, still in users' chats: a question's
("appr:<question>:<choice>", bot/telegram/approval_ask.py) and the revoke buttons under an
old /approvals ("apprv:<grant>"). Both go to the feature's press like today's buttons
("approvals:..." through the features router); an old revoke button gets the new list as
a message of its own, as it did."""

from __future__ import annotations

from aiogram import Router
from aiogram.filters.callback_data import CallbackData
from aiogram.types import CallbackQuery

from bot.app import App
from bot.approvals.commands import press, revoke_data
from bot.approvals.feature import FEATURE
from bot.approvals.gate import Choice
from bot.approvals.questions import answer_data
from bot.telegram.approval_ask import OLD_PREFIX
from bot.telegram.outbox import Outbox
from bot.telegram.replies import send_answer
from bot.telegram.user import ChatUser, use_user
from tools.feature import CommandCall, Pressed, Who


class OldAnswer(CallbackData, prefix=OLD_PREFIX):
    key: int
    choice: Choice


class OldRevoke(CallbackData, prefix="apprv"):
    grant_id: int


async def _press(query: CallbackQuery, app: App, user: ChatUser, data: str) -> tuple[Pressed, int]:
    chat = query.message.chat.id if query.message is not None else user.telegram_id
    who = Who(user.id, user.telegram_id, user.name, user.tz, chat)
    pressed = await press(CommandCall(app, who, data))
    await query.answer(pressed.toast, show_alert=pressed.alert)
    return pressed, chat


def build_router() -> Router:
    router = use_user(Router(name="approvals"))

    @router.callback_query(OldAnswer.filter())
    async def on_old_answer(
        query: CallbackQuery, callback_data: OldAnswer, app: App, user: ChatUser
    ) -> None:
        await _press(query, app, user, answer_data(callback_data.key, callback_data.choice))

    @router.callback_query(OldRevoke.filter())
    async def on_old_revoke(
        query: CallbackQuery, callback_data: OldRevoke, app: App, user: ChatUser, outbox: Outbox
    ) -> None:
        pressed, chat = await _press(query, app, user, revoke_data(callback_data.grant_id))
        if pressed.answer is not None:
            await send_answer(outbox, chat, FEATURE, pressed.answer)

    return router
