"""Delivering what is sent unasked (reminders, a code job's result, any feature's
`host.deliver`) through the Bot API: the app's `deliver` for Telegram.

Each message goes through the outbox like any reply (bot/telegram/outbox.py `hand`): the
text first, then the files, after the chat's queued replies; what Telegram does not take now
(an outage, 429, 5xx) waits for the outbox's courier, and the delivery returns once Telegram
took it, within seconds of an outage's end rather than at a later scheduler tick. 403 (the
user blocked the bot) and 400 (chat gone) are final.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from aiogram.types import InlineKeyboardButton, InlineKeyboardMarkup

from bot.telegram.files import file_items
from bot.telegram.outbox import Outbox, Undeliverable, text_items
from bot.telegram.render import Chunk, render, split_plain
from db.repos.core import Recipient
from tools.hooks import File
from tools.reminders.firing import DeliveryRejected, RecipientBlocked


@dataclass
class TelegramDelivery:
    outbox: Outbox

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
        chat = recipient.telegram_id if recipient.chat_id is None else recipient.chat_id
        if chat is None:
            raise DeliveryRejected("the local user has no Telegram chat")
        chunks: list[Chunk] = render(text) if markdown else [(t, []) for t in split_plain(text)]
        items = text_items(chunks)
        if buttons and items:
            row = [InlineKeyboardButton(text=label, callback_data=data) for label, data in buttons]
            items[-1] = replace(items[-1], markup=InlineKeyboardMarkup(inline_keyboard=[row]))
        items += file_items(list(files))
        try:
            return (await self.outbox.hand(chat, None, items))[0]
        except Undeliverable as exc:
            if exc.blocked:
                raise RecipientBlocked(str(exc)) from exc
            raise DeliveryRejected(str(exc)) from exc
