"""Delivering what is sent unasked (reminders, a code job's result, any feature's
`host.deliver`) through the Bot API: the app's `deliver` for Telegram.

Each message goes the outbox's one way (bot/telegram/outbox.py `put`: refused formatting
again as plain text, a refused photo as a document), the text first, then the files, in
order. 429 waits `retry_after`, 5xx and network errors back off, a few times each; what
still fails goes back to the scheduler, which retries the run later (its own backoff) and
records it. 403 (the user blocked the bot) and 400 (chat gone) are final.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import KW_ONLY, dataclass, replace

from aiogram import Bot
from aiogram.exceptions import TelegramBadRequest, TelegramForbiddenError
from aiogram.types import InlineKeyboardButton, InlineKeyboardMarkup

from bot.telegram.files import file_items
from bot.telegram.outbox import text_items
from bot.telegram.render import Chunk, Item, put, render, split_plain, with_retry
from db.repos.core import Recipient
from tools.hooks import File
from tools.reminders.firing import DeliveryRejected, RecipientBlocked

ATTEMPTS = 4
Sleep = Callable[[float], Awaitable[None]]


@dataclass
class TelegramDelivery:
    bot: Bot
    _: KW_ONLY
    sleep: Sleep = asyncio.sleep
    attempts: int = ATTEMPTS

    async def __call__(
        self,
        recipient: Recipient,
        text: str,
        markdown: bool,
        files: Sequence[File] = (),
        buttons: Sequence[tuple[str, str]] = (),
    ) -> int:
        """Send the text (split if long) with the buttons on its last message, then the
        files; the id of its first message."""
        if recipient.telegram_id is None:
            raise DeliveryRejected("the local user has no Telegram chat")
        chat = recipient.telegram_id
        chunks: list[Chunk] = render(text) if markdown else [(t, []) for t in split_plain(text)]
        items = text_items(chunks)
        if buttons and items:
            row = [InlineKeyboardButton(text=label, callback_data=data) for label, data in buttons]
            items[-1] = replace(items[-1], markup=InlineKeyboardMarkup(inline_keyboard=[row]))
        ids = [await self._send(chat, item) for item in items]
        for item in file_items(list(files)):
            await self._send(chat, item)
        return ids[0]

    async def _send(self, chat: int, item: Item) -> int:
        try:
            return await with_retry(
                lambda: put(self.bot, chat, item),
                f"reminder to chat {chat}",
                attempts=self.attempts,
                sleep=self.sleep,
            )
        except TelegramForbiddenError as exc:
            raise RecipientBlocked(str(exc)) from exc
        except TelegramBadRequest as exc:
            raise DeliveryRejected(str(exc)) from exc
