"""Approvals in Telegram: the question with its three buttons, in the chat the message came
from, answered only by the member whose message started the call (a stranger's press is a
toast and nothing else). The press arrives as its own update, outside the chat's order
(bot/telegram/middlewares.py, chat_key): that chat's turn is the one waiting for it."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from dataclasses import dataclass

from aiogram import Bot
from aiogram.filters.callback_data import CallbackData
from aiogram.types import InlineKeyboardButton, InlineKeyboardMarkup

from bot.agent.approvals import Choice, Question
from bot.telegram.render import send_chunk

PREFIX = "appr"
BUTTONS: tuple[tuple[str, Choice], ...] = (
    ("Allow once", "once"), ("Always for this tool", "always"), ("Deny", "deny"),
)  # fmt: skip
SAID: dict[Choice | None, str] = {
    "once": "✅ Allowed once.", "deny": "🚫 Denied.", None: "⌛ No answer in time: not run.",
    "always": "✅ Allowed, now and from now on (/approvals revokes it).",
}  # fmt: skip
CLOSED = "This question is closed."
NOT_YOURS = "Not yours: only the person who asked can answer this."


class Answer(CallbackData, prefix=PREFIX):
    key: str
    choice: Choice


@dataclass
class Waiting:
    owner: int | None  # the Telegram id that may answer
    future: asyncio.Future[Choice]


def question_text(q: Question) -> str:
    who = f"{q.user_name}, " if q.user_name else ""
    minutes = f"{q.timeout_s / 60:g} min" if q.timeout_s >= 60 else f"{q.timeout_s:g} s"
    return (
        f"🔐 {who}may I do this?\n\n{q.action}\n\n({q.effects}. "
        f"No answer within {minutes} means no.)"
    )


class TelegramAsker:
    def __init__(self, bot: Bot) -> None:
        self.bot = bot
        self.waiting: dict[str, Waiting] = {}

    async def __call__(self, q: Question) -> Choice:
        if q.chat_id is None:
            return "deny"  # nowhere to ask
        key = secrets.token_hex(6)
        future: asyncio.Future[Choice] = asyncio.get_running_loop().create_future()
        self.waiting[key] = Waiting(q.telegram_user_id, future)
        text, sent, choice = question_text(q), None, None
        row = [
            InlineKeyboardButton(text=label, callback_data=Answer(key=key, choice=c).pack())
            for label, c in BUTTONS
        ]
        try:
            sent = await send_chunk(
                self.bot, q.chat_id, text, [], InlineKeyboardMarkup(inline_keyboard=[row])
            )
            choice = await future
            return choice
        finally:  # also at the timeout: the buttons go, the outcome is said
            del self.waiting[key]
            if sent is not None:
                with contextlib.suppress(Exception):
                    await self.bot.edit_message_text(
                        f"{text}\n\n{SAID[choice]}", chat_id=q.chat_id, message_id=sent
                    )

    def answer(self, key: str, presser: int, choice: Choice) -> str:
        """A button press: the toast to show the presser."""
        waiting = self.waiting.get(key)
        if waiting is None or waiting.future.done():
            return CLOSED
        if waiting.owner is not None and presser != waiting.owner:
            return NOT_YOURS
        waiting.future.set_result(choice)
        return SAID[choice]
