"""One answer to one user message: streamed drafts, the final Markdown, then any files."""

from __future__ import annotations

import time

from aiogram.enums import ChatType
from aiogram.types import Message

from bot.agent.runner import Events, Incoming, Reply
from bot.app import App
from bot.telegram.files import send_files
from bot.telegram.render import send_markdown
from bot.telegram.streaming import ReplyStreamer
from bot.telegram.voice_reply import send_voice_reply


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
    streamer = ReplyStreamer(
        bot, message.chat.id, drafts=message.chat.type == ChatType.PRIVATE, interval=draft_interval
    )
    try:
        reply = await app.agent.handle(incoming, Events(streamer.on_text, streamer.on_tools))
    finally:
        await streamer.close()
    answered_at = time.perf_counter()
    await send_markdown(bot, message.chat.id, reply.text)
    if reply.files:
        # Several runs may write the same name: the last version is the one to send.
        latest = {name: (name, data) for name, data in reply.files}
        await send_files(bot, message.chat.id, list(latest.values()))
    await send_voice_reply(bot, message.chat.id, app, incoming, reply, answered_at)
    return reply
