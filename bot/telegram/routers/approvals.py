"""Approval buttons (Allow once / Always / Deny, bot/telegram/approval_ask.py) and
/approvals: the user's "always" grants, each with a revoke button."""

from __future__ import annotations

from aiogram import Bot, Router
from aiogram.filters import CommandObject
from aiogram.filters.callback_data import CallbackData
from aiogram.types import CallbackQuery, InlineKeyboardButton, InlineKeyboardMarkup, Message

from bot.app import App
from bot.command_texts import approvals_command
from bot.telegram.approval_ask import CLOSED, Answer, TelegramAsker
from bot.telegram.commands import on_command
from bot.telegram.render import send_chunk
from bot.telegram.user import ChatUser, use_user
from db.repos import approvals as repo


class Revoke(CallbackData, prefix="apprv"):
    grant_id: int


async def _listing(app: App, user: ChatUser, args: str = "") -> tuple[str, InlineKeyboardMarkup]:
    text = await approvals_command(app, user.id, user.telegram_id, args)
    rows = [
        [InlineKeyboardButton(text=f"Revoke {g.tool}", callback_data=Revoke(grant_id=g.id).pack())]
        for g in await repo.grants(app.session_factory, user.id)
    ]
    return text, InlineKeyboardMarkup(inline_keyboard=rows)


def build_router() -> Router:
    router = use_user(Router(name="approvals"))

    @router.callback_query(Answer.filter())
    async def on_answer(query: CallbackQuery, callback_data: Answer, app: App) -> None:
        gate = app.agent.approvals
        asker = gate.asker if gate is not None else None
        if not isinstance(asker, TelegramAsker):
            await query.answer(CLOSED)
            return
        await query.answer(
            await asker.press(callback_data.key, query.from_user.id, callback_data.choice)
        )

    @router.message(on_command("approvals"), flags={"command": "approvals"})
    async def on_approvals(
        message: Message, command: CommandObject, bot: Bot, app: App, user: ChatUser
    ) -> None:
        text, markup = await _listing(app, user, command.args or "")
        await send_chunk(bot, message.chat.id, text, [], markup if markup.inline_keyboard else None)

    @router.callback_query(Revoke.filter())
    async def on_revoke(
        query: CallbackQuery, callback_data: Revoke, bot: Bot, app: App, user: ChatUser
    ) -> None:
        now = app.deps.clock()
        tool = await repo.revoke(
            app.session_factory, user.id, user.telegram_id, callback_data.grant_id, now
        )
        await query.answer(
            f"Revoked: {tool} asks again." if tool else "That grant is gone already."
        )
        text, markup = await _listing(app, user)
        chat = query.message.chat.id if query.message is not None else user.telegram_id
        await send_chunk(bot, chat, text, [], markup if markup.inline_keyboard else None)

    return router
