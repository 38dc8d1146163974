"""Approvals in Telegram: the question with its three buttons, in the chat the message came
from. A press is the approvals feature's (bot/approvals/commands.py press, through the
features router): only the member whose message started the call may answer (anyone
else's press is a toast and nothing else), and it is settled in the database, so the worker
that receives it need not be the one that asked; this asker waits for that row. The press
arrives as its own update, outside the chat's order (bot/telegram/middlewares.py,
chat_key): that chat's turn is the one waiting for it.

The question shows the whole action: one too long for a message goes along as a file
(what a message would cut off is where a payload hides). While it waits, the chat is not
frozen: WAITING tells the chat's order (bot/telegram/middlewares.py) that its turn waits
for a question, so commands are answered at once and a message hears why it waits.

A question Telegram does not take (an outage, 429) is not a no: it goes through the outbox
like any reply and the turn waits for it to arrive; the time to answer starts when it is
shown. Only a question Telegram refuses for good (the chat is gone, the bot blocked) is
not asked: Undeliverable.

A shutdown does not wait for a press (`stop`): the questions are closed at once, their turns
end, and the next start continues them (bot/telegram/resume.py), asking again."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from aiogram import Bot
from aiogram.types import InlineKeyboardButton, InlineKeyboardMarkup

from bot.approvals import repo
from bot.approvals.feature import FEATURE
from bot.approvals.gate import Choice, Question
from bot.approvals.questions import ALWAYS_LABEL, DOORBELL, answer_data, said
from bot.telegram.outbox import Outbox
from bot.telegram.render import Item
from db.engine import SessionFactory
from tools.feature import button_data

POLL_S = 1.0  # a press another worker settled is seen within this
# Characters of the action in the message; a longer action is sent whole as a file first
# (a message holds 4096, and the rest of the question needs room).
SHOWN_CHARS = 2500
WHY_CHARS = 400  # of the outside content named as the reason to ask
ANSWER = button_data(FEATURE, "answer")
# The question's buttons before approvals was a feature ("appr:<key>:<choice>"): still
# answered (bot/telegram/routers/approvals.py), as a question a worker of the previous
# version asked may be pressed after a newer one took over the updates.
OLD_PREFIX = "appr"
RESTARTING = "⌛ Closed: I am restarting. Not run; I'll ask again when I'm back."


def answers_a_question(data: str) -> bool:
    """A press on a question's button: the chat's turn waits for it, so it must not queue."""
    return data.startswith((f"{ANSWER}:", f"{OLD_PREFIX}:"))


def buttons(q: Question) -> tuple[tuple[str, Choice], ...]:
    return (("Allow once", "once"), (ALWAYS_LABEL[q.scheduled], "always"), ("Deny", "deny"))


def action_file(q: Question) -> tuple[str, bytes] | None:
    """The whole action as a file, when the message shows only its start."""
    if len(q.action) <= SHOWN_CHARS:
        return None
    return f"action-{q.key}.txt", q.action.encode("utf-8", "surrogatepass")


def question_text(q: Question) -> str:
    who = f"{q.user_name}, " if q.user_name else ""
    minutes = f"{q.timeout_s / 60:g} min" if q.timeout_s >= 60 else f"{q.timeout_s:g} s"
    action = q.action
    if len(action) > SHOWN_CHARS:
        action = (
            f"{action[:SHOWN_CHARS]}\n… and {len(action) - SHOWN_CHARS} more characters. The "
            "whole action is in the file above: read it all before you answer."
        )
    why = ""
    if q.why:
        seen = q.why if len(q.why) <= WHY_CHARS else q.why[: WHY_CHARS - 1] + "…"
        needs = f" This call would {q.needs}." if q.needs else ""
        why = (
            f"\nI have read outside content in this conversation ({seen}); it may be "
            "steering me, so I ask before anything that reaches out or changes what you "
            f"keep (code without the network runs unasked).{needs}"
        )
    when = "\nA scheduled task asks: nobody may be watching." if q.scheduled else ""
    return (
        f"🔐 {who}may I do this?{why}{when}\n\n{action}\n\n({q.effects}. "
        f"No answer within {minutes} means no.)"
    )


@dataclass
class _Wait:
    questions: int = 0
    told: bool = False  # a message that came meanwhile heard that a question waits


class Waiting:
    """The chats whose turn waits for an approval question in this process. Process-wide
    like the doorbell: the asker and the chat's order meet whatever instance holds them."""

    def __init__(self) -> None:
        self._chats: dict[int, _Wait] = {}

    @contextlib.contextmanager
    def asking(self, chat_id: int) -> Iterator[None]:
        wait = self._chats.setdefault(chat_id, _Wait())
        wait.questions += 1
        wait.told = False
        try:
            yield
        finally:
            wait.questions -= 1
            if not wait.questions:
                del self._chats[chat_id]

    def waits(self, chat_id: int) -> bool:
        return chat_id in self._chats

    def tell_once(self, chat_id: int) -> bool:
        """True the first time a message comes while this chat's question waits."""
        wait = self._chats.get(chat_id)
        if wait is None or wait.told:
            return False
        wait.told = True
        return True


WAITING = Waiting()


class TelegramAsker:
    def __init__(self, bot: Bot, sf: SessionFactory, outbox: Outbox) -> None:
        self.bot, self.sf, self.outbox = bot, sf, outbox
        self._asking: set[asyncio.Task[Any]] = set()
        self._stopping = False

    def stop(self) -> None:
        """Close every question still waiting (a shutdown): their turns are cut, not run
        out to the grace period."""
        self._stopping = True
        for task in self._asking:
            task.cancel()

    async def __call__(self, q: Question) -> Choice:
        if q.chat_id is None:
            return "deny"  # nowhere to ask
        task = asyncio.current_task()
        if task is not None:
            self._asking.add(task)
        try:
            return await self._ask(q, q.chat_id)
        finally:
            self._asking.discard(task)

    async def _ask(self, q: Question, chat: int) -> Choice:
        text, sent, decision = question_text(q), None, repo.PENDING
        row = [
            InlineKeyboardButton(
                text=label, callback_data=button_data(FEATURE, answer_data(q.key, c))
            )
            for label, c in buttons(q)
        ]
        markup = InlineKeyboardMarkup(inline_keyboard=[row])
        try:
            # A scheduled run's question holds no chat turn: the chat's order is not waiting.
            holds = contextlib.nullcontext() if q.scheduled else WAITING.asking(chat)
            with DOORBELL.waiting(q.key) as rung, holds:
                items = [Item("answer", text, [], markup)]
                if (whole := action_file(q)) is not None:
                    items.insert(0, Item("document", data=whole[1], filename=whole[0]))
                sent = (await self.outbox.hand(chat, None, items))[-1]
                async with asyncio.timeout(q.timeout_s):  # from when it is shown
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
                    outcome = said(decision, q.scheduled)
                    if self._stopping and decision == repo.PENDING:
                        outcome = RESTARTING
                    await self.bot.edit_message_text(
                        f"{text}\n\n{outcome}", chat_id=chat, message_id=sent
                    )
