"""One answer to one user message: streamed drafts, the final Markdown, then any files.

An answer Telegram does not take (an outage: 5xx, 429, network, after the retries) is
kept in the outbox and sent when Telegram is back (bot/telegram/outbox.py)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from aiogram import Bot
from aiogram.enums import ChatType
from aiogram.types import Message

from bot.agent.runner import Events, Incoming, Reply
from bot.app import App
from bot.telegram.files import send_files
from bot.telegram.outbox import TRANSIENT, Outbox
from bot.telegram.render import render, send_chunk
from bot.telegram.streaming import ReplyStreamer
from bot.telegram.voice_reply import send_voice_reply
from tools.errors import storage_problem

log = logging.getLogger(__name__)

BUSY_WAIT_S = 5.0
FILES_LOST = "(The files of this answer could not be sent while Telegram was down; ask again.)"


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


async def answer(message: Message, app: App, incoming: Incoming, draft_interval: float) -> Reply:
    bot = message.bot
    assert bot is not None
    chat = message.chat.id
    outbox = Outbox(bot, app.session_factory, app.deps.clock)
    private = message.chat.type == ChatType.PRIVATE
    streamer = ReplyStreamer(bot, chat, drafts=private, interval=draft_interval)
    try:
        reply = await _handle(app, incoming, streamer)
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
    if not await deliver(bot, outbox, chat, incoming.telegram_message_id, reply):
        return reply
    if reply.files:
        # Several runs may write the same name: the last version is the one to send.
        latest = {name: (name, data) for name, data in reply.files}
        await send_files(bot, chat, list(latest.values()))
    await send_voice_reply(bot, chat, app, incoming, reply, answered_at)
    return reply


async def _handle(app: App, incoming: Incoming, streamer: ReplyStreamer) -> Reply:
    """The agent's answer. A database busy past its timeout before the model said or did
    anything (the message was not stored yet) is waited out once: the message is kept and
    answered without the user noticing; otherwise the error line says what happened."""
    events = Events(streamer.on_text, streamer.on_tools)
    try:
        return await app.agent.handle(incoming, events)
    except Exception as exc:
        if storage_problem(exc) != "busy" or streamer.started:
            raise
        log.warning("database busy before the turn began; trying once more in %g s", BUSY_WAIT_S)
    await asyncio.sleep(BUSY_WAIT_S)
    return await app.agent.handle(incoming, events)


async def deliver(bot: Bot, outbox: Outbox, chat: int, about: int | None, reply: Reply) -> bool:
    """Send the answer; False when Telegram did not take it and it went to the outbox."""
    chunks = render(reply.text)
    for i, (text, entities) in enumerate(chunks):
        try:
            await send_chunk(bot, chat, text, entities)
        except TRANSIENT as exc:
            log.warning("answer to chat %d not sent (%s): queued", chat, type(exc).__name__)
            rest = chunks[i:]
            if reply.files:
                rest.append((FILES_LOST, []))
            await outbox.queue(chat, about, rest)
            return False
    return True
