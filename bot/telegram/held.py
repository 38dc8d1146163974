"""The chats whose turn waits for the model provider (an outage waited out, a stream gone
quiet): a message that comes meanwhile is held behind that turn, and gets a reaction so the
person sees it was taken and waits too (bot/telegram/middlewares.py), rather than silence.
Process-wide, like the approval questions' WAITING: the turn and the chat's order meet
whatever adapter instance holds them."""

from __future__ import annotations

import logging

from aiogram import Bot
from aiogram.types import ReactionTypeEmoji

log = logging.getLogger(__name__)

REACTION = "👀"  # one of the reactions Telegram lets a bot set


HELD: set[int] = set()  # the chats whose turn waits for the model now


async def react(bot: Bot, chat_id: int, message_id: int) -> None:
    """The sign on a held message; only a sign: a refusal is logged, nothing more."""
    try:
        await bot.set_message_reaction(chat_id, message_id, [ReactionTypeEmoji(emoji=REACTION)])
    except Exception as exc:
        log.info("chat %d: no reaction on a held message (%s)", chat_id, exc)
