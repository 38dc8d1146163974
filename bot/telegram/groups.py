"""Groups: the bot answers a message there only when it is addressed (GROUP_REPLIES=mention,
the default): an @mention of the bot, a reply to one of its messages, or a command."""

from __future__ import annotations

import re

from aiogram import Bot
from aiogram.enums import ChatType
from aiogram.types import Message

GROUP_CHATS = (ChatType.GROUP, ChatType.SUPERGROUP)


async def addressed(message: Message, bot: Bot, mode: str) -> bool:
    """Whether the bot should answer this message (always true outside groups)."""
    if message.chat.type not in GROUP_CHATS or mode == "all":
        return True
    me = await bot.me()  # cached by aiogram after the first call
    replied = message.reply_to_message
    if replied is not None and replied.from_user is not None and replied.from_user.id == me.id:
        return True
    text = message.text or message.caption or ""
    if text.startswith("/"):
        return True
    return bool(me.username) and f"@{me.username}".lower() in text.lower()


def without_mention(text: str, username: str | None, keep_if_empty: bool = True) -> str:
    """The text with the bot's @mention taken out (the model needs only the request); a
    text that was only the mention stays as it was unless `keep_if_empty` is False (a
    caption: the file is the request)."""
    if not username:
        return text
    left = re.sub(rf"@{re.escape(username)}\b", "", text, flags=re.IGNORECASE).strip()
    return left or (text if keep_if_empty else "")


async def addressed_any(messages: list[Message], bot: Bot, mode: str) -> bool:
    """Whether any part of an album (or the one message) is addressed to the bot."""
    for message in messages:
        if await addressed(message, bot, mode):
            return True
    return False
