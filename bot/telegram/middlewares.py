"""Update middlewares: who may talk to the bot, and one-at-a-time handling per chat."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiogram import BaseMiddleware, Bot
from aiogram.types import TelegramObject, Update, User

from bot.telegram.approval_ask import WAITING, answers_a_question
from bot.telegram.groups import addressed
from bot.telegram.render import send_plain

log = logging.getLogger(__name__)

Handler = Callable[[TelegramObject, dict[str, Any]], Awaitable[Any]]
_MAX_REMEMBERED_STRANGERS = 10_000


def refusal_text(user_id: int) -> str:
    return (
        "This is a private Sidekick bot, so I can't answer you.\n"
        f"Your Telegram user id is {user_id}.\n"
        "If this is your bot, add this line to its .env file and restart it "
        "(separate several ids with commas):\n"
        f"ALLOWED_USER_IDS={user_id}"
    )


class InFlight(BaseMiddleware):
    """The update-handling tasks running now, so shutdown can wait for them.

    Registered outermost: a task registers itself in its first step, before anything in
    it can wait (an album held open, a chat's turn), so no update escapes the count.
    """

    def __init__(self) -> None:
        self.tasks: set[asyncio.Task[Any]] = set()
        self._idle = asyncio.Event()
        self._idle.set()

    def add(self, task: asyncio.Task[Any]) -> None:
        self.tasks.add(task)
        self._idle.clear()

    def discard(self, task: asyncio.Task[Any]) -> None:
        self.tasks.discard(task)
        if not self.tasks:
            self._idle.set()

    async def wait_idle(self) -> None:
        await self._idle.wait()

    async def __call__(self, handler: Handler, event: TelegramObject, data: dict[str, Any]) -> Any:
        task = asyncio.current_task()
        if task is None:
            return await handler(event, data)
        self.add(task)
        try:
            return await handler(event, data)
        finally:
            self.discard(task)


def chat_key(update: Update) -> int | None:
    """The chat an update belongs to; updates of one chat are handled in order."""
    if update.message is not None:
        return update.message.chat.id
    if update.edited_message is not None:
        return update.edited_message.chat.id
    if update.callback_query is not None:
        if answers_a_question(update.callback_query.data or ""):
            return None  # the chat's turn is waiting for this very press: no queue
        msg = update.callback_query.message
        return msg.chat.id if msg is not None else update.callback_query.from_user.id
    return None


class AccessMiddleware(BaseMiddleware):
    """Only ALLOWED_USER_IDS get served; a stranger gets one reply with their id, once."""

    def __init__(self, allowed: frozenset[int]) -> None:
        self.allowed = allowed
        self.told: set[int] = set()

    async def __call__(self, handler: Handler, event: TelegramObject, data: dict[str, Any]) -> Any:
        user: User | None = data.get("event_from_user")
        if user is not None and user.id in self.allowed:
            return await handler(event, data)
        if user is None or not isinstance(event, Update):
            return None
        log.warning("refused an update from user id %s (not in ALLOWED_USER_IDS)", user.id)
        bot: Bot = data["bot"]
        first_time = user.id not in self.told
        if first_time and len(self.told) < _MAX_REMEMBERED_STRANGERS:
            self.told.add(user.id)
        if event.callback_query is not None:
            await bot.answer_callback_query(event.callback_query.id, "Not allowed.")
        elif event.message is not None and first_time:
            # In a group, only a stranger who talks to the bot hears why it stays silent.
            if await addressed(event.message, bot, "mention"):
                await bot.send_message(event.message.chat.id, refusal_text(user.id))
            else:
                self.told.discard(user.id)
        return None


WAITS_FOR_QUESTION = (
    "⏳ The approval question above is waiting for an answer (no answer in time counts as "
    "no). I'll answer this message right after it; commands are answered meanwhile."
)
UNORDERED = "unordered"  # set in the handler data of a command answered out of turn


def is_command(update: Update) -> bool:
    message = update.message
    return message is not None and (message.text or "").startswith("/")


async def _for_the_bot(update: Update, data: dict[str, Any]) -> bool:
    """A message from someone served, addressed to the bot (in a group, people talking
    among themselves hear nothing)."""
    message, app = update.message, data["app"]
    if message is None or message.from_user is None:
        return False
    if message.from_user.id not in app.settings.allowed_user_ids:
        return False
    return await addressed(message, data["bot"], app.settings.group_replies)


class ChatOrderMiddleware(BaseMiddleware):
    """Handle the updates of one chat one at a time, in arrival order; chats run concurrently.

    aiogram runs every update in its own task (handle_as_tasks); asyncio.Lock wakes waiters
    first-in first-out, and the tasks reach the lock in the order polling created them.

    Except while the chat's turn waits for the user's answer to an approval question (up to
    its timeout, minutes): then a command is answered at once, and the first message that
    comes meanwhile hears at once that it waits for the question, then keeps its place.
    A plain message does not settle the question: a button does (text could be anything,
    and the message is answered right after).
    """

    def __init__(self) -> None:
        self.locks: dict[int, asyncio.Lock] = {}
        self.users: dict[int, int] = {}

    async def __call__(self, handler: Handler, event: TelegramObject, data: dict[str, Any]) -> Any:
        key = chat_key(event) if isinstance(event, Update) else None
        if key is None:
            return await handler(event, data)
        lock = self.locks.get(key)
        if lock is None:
            lock = self.locks[key] = asyncio.Lock()
        if lock.locked() and isinstance(event, Update) and WAITING.waits(key):
            if is_command(event):
                data[UNORDERED] = True
                return await handler(event, data)
            if await _for_the_bot(event, data) and WAITING.tell_once(key):
                await send_plain(data["bot"], key, WAITS_FOR_QUESTION)
        self.users[key] = self.users.get(key, 0) + 1
        try:
            async with lock:
                return await handler(event, data)
        finally:
            # Forget idle chats so the dict does not grow with every chat ever seen.
            self.users[key] -= 1
            if not self.users[key]:
                del self.users[key], self.locks[key]
