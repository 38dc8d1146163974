"""Approvals in Telegram: the question with its three buttons, in the chat the message came
from. A press is the approvals feature's (bot/approvals/commands.py press, through the
features router): only the member whose message started the call may answer (anyone
else's press is a toast and nothing else), and it is settled in the database, so the worker
that receives it need not be the one that asked; this asker waits for that row. The press
arrives as its own update, outside the chat's order (bot/telegram/middlewares.py,
chat_key): that chat's turn is the one waiting for it."""

from __future__ import annotations

import asyncio
import contextlib

from aiogram import Bot
from aiogram.types import InlineKeyboardButton, InlineKeyboardMarkup

from bot.approvals import repo
from bot.approvals.feature import FEATURE
from bot.approvals.gate import Choice, Question
from bot.approvals.questions import DOORBELL, SAID, answer_data
from bot.telegram.render import send_chunk
from db.engine import SessionFactory
from tools.feature import button_data

POLL_S = 1.0  # a press another worker settled is seen within this
BUTTONS: tuple[tuple[str, Choice], ...] = (
    ("Allow once", "once"), ("Always for this tool", "always"), ("Deny", "deny"),
)  # fmt: skip
ANSWER = button_data(FEATURE, "answer")
# The question's buttons before approvals was a feature ("appr:<key>:<choice>"): still
# answered (bot/telegram/routers/approvals.py), as a question a worker of the previous
# version asked may be pressed after a newer one took over the updates.
OLD_PREFIX = "appr"


def answers_a_question(data: str) -> bool:
    """A press on a question's button: the chat's turn waits for it, so it must not queue."""
    return data.startswith((f"{ANSWER}:", f"{OLD_PREFIX}:"))


def question_text(q: Question) -> str:
    who = f"{q.user_name}, " if q.user_name else ""
    minutes = f"{q.timeout_s / 60:g} min" if q.timeout_s >= 60 else f"{q.timeout_s:g} s"
    return (
        f"🔐 {who}may I do this?\n\n{q.action}\n\n({q.effects}. "
        f"No answer within {minutes} means no.)"
    )


class TelegramAsker:
    def __init__(self, bot: Bot, sf: SessionFactory) -> None:
        self.bot, self.sf = bot, sf

    async def __call__(self, q: Question) -> Choice:
        if q.chat_id is None:
            return "deny"  # nowhere to ask
        text, sent, decision = question_text(q), None, repo.PENDING
        row = [
            InlineKeyboardButton(
                text=label, callback_data=button_data(FEATURE, answer_data(q.key, c))
            )
            for label, c in BUTTONS
        ]
        markup = InlineKeyboardMarkup(inline_keyboard=[row])
        try:
            with DOORBELL.waiting(q.key) as rung:
                sent = await send_chunk(self.bot, q.chat_id, text, [], markup)
                while decision == repo.PENDING:
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(POLL_S):
                            await rung.wait()
                    rung.clear()
                    found = await repo.question(self.sf, q.key)
                    decision = found.decision if found is not None else "denied"
            return "once" if decision == "once" else "always" if decision == "always" else "deny"
        finally:  # also at the timeout: the buttons go, the outcome is said
            if sent is not None:
                with contextlib.suppress(Exception):
                    said = SAID.get(decision, SAID["denied"])
                    await self.bot.edit_message_text(
                        f"{text}\n\n{said}", chat_id=q.chat_id, message_id=sent
                    )
