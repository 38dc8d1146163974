"""Delivering reminders through the Bot API: the scheduler's `deliver` for Telegram.

429 waits `retry_after`, 5xx and network errors back off, a few times each; what still
fails goes back to the scheduler, which retries the run later (its own backoff) and
records it. 403 (the user blocked the bot) and 400 (chat gone) are final.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import KW_ONLY, dataclass

from aiogram import Bot
from aiogram.exceptions import TelegramBadRequest, TelegramForbiddenError
from aiogram.types import BufferedInputFile, MessageEntity

from bot.telegram.files import file_items
from bot.telegram.outbox import Item
from bot.telegram.render import Chunk, render, split_plain, with_retry
from db.repos.core import Recipient
from tools.feature import File
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
        self, recipient: Recipient, text: str, markdown: bool, files: Sequence[File] = ()
    ) -> int:
        """Send the text (split if long), then the files; the id of its first message."""
        if recipient.telegram_id is None:
            raise DeliveryRejected("the local user has no Telegram chat")
        chat = recipient.telegram_id
        chunks: list[Chunk] = render(text) if markdown else [(t, []) for t in split_plain(text)]
        ids = []
        for chunk, entities in chunks:
            ids.append(await self._send(chat, chunk, entities))
        for item in file_items(list(files)):
            await self._send_file(chat, item)
        return ids[0]

    async def _send_file(self, chat: int, item: Item) -> None:
        if item.kind == "answer":  # a file too big for Telegram: a line says so
            await self._send(chat, item.text, [])
            return
        file = BufferedInputFile(item.data or b"", filename=item.filename or "file")
        send = self.bot.send_photo if item.kind == "photo" else self.bot.send_document
        try:
            await with_retry(
                lambda: send(chat, file),
                f"file to chat {chat}",
                attempts=self.attempts,
                sleep=self.sleep,
            )
        except TelegramForbiddenError as exc:
            raise RecipientBlocked(str(exc)) from exc
        except TelegramBadRequest as exc:
            if item.kind == "photo":  # e.g. odd dimensions: a document works
                await self._send_file(
                    chat, Item("document", data=item.data, filename=item.filename)
                )
                return
            raise DeliveryRejected(str(exc)) from exc

    async def _send(self, chat: int, text: str, entities: list[MessageEntity]) -> int:
        try:
            msg = await with_retry(
                lambda: self.bot.send_message(
                    chat, text, entities=entities or None, parse_mode=None
                ),
                f"reminder to chat {chat}",
                attempts=self.attempts,
                sleep=self.sleep,
            )
        except TelegramForbiddenError as exc:
            raise RecipientBlocked(str(exc)) from exc
        except TelegramBadRequest as exc:
            if entities:  # the formatting was refused: the same text, plain
                return await self._send(chat, text, [])
            raise DeliveryRejected(str(exc)) from exc
        return msg.message_id
