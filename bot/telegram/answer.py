"""One answer to one user message: streamed drafts, the final Markdown, then any files.

The answer and its files go through the outbox (bot/telegram/outbox.py): what Telegram
does not take (an outage: 5xx, 429, network) is kept and sent when it is back, and while
the chat has replies queued, this one goes after them. While the model is waited for (an
outage, a stalled stream) the user gets one line that says so, the same way."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from aiogram.enums import ChatType
from aiogram.types import Message

from bot.agent.runner import Events, Incoming, Reply
from bot.app import App
from bot.telegram.files import file_items
from bot.telegram.outbox import Outbox, text_items
from bot.telegram.render import Item, render
from bot.telegram.streaming import ReplyStreamer
from bot.telegram.voice_reply import send_voice_reply
from tools.errors import storage_problem

log = logging.getLogger(__name__)

BUSY_WAIT_S = 5.0


def incoming_from(message: Message, text: str, kind: str = "text") -> Incoming:
    user = message.from_user
    return Incoming(
        text=text,
        telegram_user_id=user.id if user else None,
        user_name=user.full_name if user else "",
        chat_id=message.chat.id,
        telegram_message_id=message.message_id,
        kind=kind,
    )


async def answer(
    message: Message, app: App, incoming: Incoming, draft_interval: float, outbox: Outbox
) -> Reply:
    bot = message.bot
    assert bot is not None
    chat = message.chat.id
    private = message.chat.type == ChatType.PRIVATE
    streamer = ReplyStreamer(bot, chat, drafts=private, interval=draft_interval)
    told = False

    async def on_wait(line: str) -> None:
        nonlocal told
        if not told:  # one word per message, whatever the model's trouble
            told = True
            await outbox.send(chat, None, text_items([line]))

    events = Events(streamer.on_text, streamer.on_tools, on_wait)
    try:
        reply = await _handle(app, incoming, events, streamer)
    except Exception:
        # The error handler tells the user; remember that, so a restart does not ask them
        # to send this message again.
        if incoming.telegram_message_id is not None:
            with contextlib.suppress(Exception):
                await outbox.settled(chat, incoming.telegram_message_id)
        raise
    finally:
        await streamer.close()
    answered_at = time.perf_counter()
    if not await deliver(outbox, chat, incoming.telegram_message_id, reply):
        return reply  # queued: it goes when Telegram is back, without the spoken version
    await send_voice_reply(bot, outbox, chat, app, incoming, reply, answered_at)
    return reply


async def _handle(app: App, incoming: Incoming, events: Events, streamer: ReplyStreamer) -> Reply:
    """The agent's answer. A database busy past its timeout before the model said or did
    anything (the message was not stored yet) is waited out once: the message is kept and
    answered without the user noticing; otherwise the error line says what happened."""
    try:
        return await app.agent.handle(incoming, events)
    except Exception as exc:
        if storage_problem(exc) != "busy" or streamer.started:
            raise
        log.warning("database busy before the turn began; trying once more in %g s", BUSY_WAIT_S)
    await asyncio.sleep(BUSY_WAIT_S)
    return await app.agent.handle(incoming, events)


async def deliver(outbox: Outbox, chat: int, about: int | None, reply: Reply) -> bool:
    """Send the answer and its files; False when (some of) it went to the outbox."""
    items: list[Item] = text_items(render(reply.text))
    # Several runs may write the same name: the last version is the one to send.
    latest = {name: (name, data) for name, data in reply.files}
    items += file_items(list(latest.values()))
    return await outbox.send(chat, about, items)
