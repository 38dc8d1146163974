"""Approvals in Telegram: the question with its three buttons, in the chat the message came
from, answered only by the member whose message started the call (anyone else's press is a
toast and nothing else). The press arrives as its own update, outside the chat's order
(bot/telegram/middlewares.py, chat_key): that chat's turn is the one waiting for it. It is
settled in the database, so the worker that receives it need not be the one that asked."""

from __future__ import annotations

import asyncio
import contextlib

from aiogram import Bot
from aiogram.filters.callback_data import CallbackData
from aiogram.types import InlineKeyboardButton, InlineKeyboardMarkup

from bot.agent.approvals import DECISIONS, Choice, Question
from bot.telegram.render import send_chunk
from db.engine import SessionFactory
from db.repos import approvals as repo
from tools.base import Clock

PREFIX = "appr"
POLL_S = 1.0  # a press another worker settled is seen within this
BUTTONS: tuple[tuple[str, Choice], ...] = (
    ("Allow once", "once"), ("Always for this tool", "always"), ("Deny", "deny"),
)  # fmt: skip
SAID = {
    "once": "✅ Allowed once.", "denied": "🚫 Denied.",
    "always": "✅ Allowed, now and from now on (/approvals revokes it).",
    repo.PENDING: "⌛ No answer in time: not run.",
}  # fmt: skip
CLOSED = "This question is closed."
NOT_YOURS = "Not yours: only the person who asked can answer this."


class Answer(CallbackData, prefix=PREFIX):
    key: int
    choice: Choice


def question_text(q: Question) -> str:
    who = f"{q.user_name}, " if q.user_name else ""
    minutes = f"{q.timeout_s / 60:g} min" if q.timeout_s >= 60 else f"{q.timeout_s:g} s"
    return (
        f"🔐 {who}may I do this?\n\n{q.action}\n\n({q.effects}. "
        f"No answer within {minutes} means no.)"
    )


class TelegramAsker:
    def __init__(self, bot: Bot, sf: SessionFactory, clock: Clock) -> None:
        self.bot, self.sf, self.clock = bot, sf, clock
        self.wake: dict[int, asyncio.Event] = {}  # questions this process waits for

    async def __call__(self, q: Question) -> Choice:
        if q.chat_id is None:
            return "deny"  # nowhere to ask
        event = self.wake[q.key] = asyncio.Event()
        text, sent, decision = question_text(q), None, repo.PENDING
        row = [
            InlineKeyboardButton(text=label, callback_data=Answer(key=q.key, choice=c).pack())
            for label, c in BUTTONS
        ]
        markup = InlineKeyboardMarkup(inline_keyboard=[row])
        try:
            sent = await send_chunk(self.bot, q.chat_id, text, [], markup)
            while decision == repo.PENDING:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(POLL_S):
                        await event.wait()
                found = await repo.question(self.sf, q.key)
                decision = found.decision if found is not None else "denied"
            return "once" if decision == "once" else "always" if decision == "always" else "deny"
        finally:  # also at the timeout: the buttons go, the outcome is said
            del self.wake[q.key]
            if sent is not None:
                with contextlib.suppress(Exception):
                    said = SAID.get(decision, SAID["denied"])
                    await self.bot.edit_message_text(
                        f"{text}\n\n{said}", chat_id=q.chat_id, message_id=sent
                    )

    async def press(self, key: int, presser: int, choice: Choice) -> str:
        """A button press (in any worker): settle the question; the toast for the presser."""
        found = await repo.question(self.sf, key)
        if found is None or found.decision != repo.PENDING:
            return CLOSED
        if found.by_telegram_id != presser:
            return NOT_YOURS
        stands = await repo.settle(self.sf, key, DECISIONS[choice], self.clock())
        if key in self.wake:
            self.wake[key].set()
        return SAID[stands] if stands == DECISIONS[choice] else CLOSED
