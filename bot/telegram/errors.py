"""The one error handler: the user gets a short line (through the outbox, so it keeps the
chat's order and outlives a Telegram outage), the log gets the traceback."""

from __future__ import annotations

import logging

from aiogram import Bot
from aiogram.types import ErrorEvent, Update

from bot.errors import SidekickError, public_text
from bot.telegram.outbox import Outbox

log = logging.getLogger(__name__)


def _chat_id(update: Update) -> int | None:
    if update.message is not None:
        return update.message.chat.id
    if update.callback_query is not None:
        msg = update.callback_query.message
        return msg.chat.id if msg is not None else update.callback_query.from_user.id
    return None


async def on_error(event: ErrorEvent, bot: Bot, outbox: Outbox) -> bool:
    exc = event.exception
    if isinstance(exc, SidekickError):
        log.warning("update %s: %s", event.update.update_id, exc)
    else:
        # The log filter scrubs secrets from the message and the traceback.
        log.error("update %s failed", event.update.update_id, exc_info=exc)
    if event.update.callback_query is not None:
        try:
            await bot.answer_callback_query(event.update.callback_query.id)
        except Exception:
            log.debug("could not answer the callback query", exc_info=True)
    chat_id = _chat_id(event.update)
    if chat_id is not None:
        try:
            await outbox.say(chat_id, public_text(exc))
        except Exception:
            log.exception("could not tell the user about the error")
    return True
