"""Plain messages go to the agent; the answer streams as drafts and is sent once at the end."""

from __future__ import annotations

from aiogram import Router
from aiogram.enums import ChatType
from aiogram.types import Message

from bot.agent.runner import Events, Incoming
from bot.app import App
from bot.telegram.groups import GROUP_CHATS, addressed, without_mention
from bot.telegram.render import send_markdown, send_plain
from bot.telegram.streaming import ReplyStreamer

TEXT_ONLY = "I only read text for now. Please write your message as text."


async def has_text(message: Message) -> bool:
    # An async filter on purpose: aiogram runs sync filters (F.text too) in a worker
    # thread, which costs more than the rest of the routing for every message.
    return message.text is not None


def build_router() -> Router:
    router = Router(name="chat")

    @router.message(has_text)
    async def on_text(message: Message, app: App, draft_interval: float) -> None:
        bot = message.bot
        assert bot is not None and message.text is not None
        if not await addressed(message, bot, app.settings.group_replies):
            return
        user = message.from_user
        streamer = ReplyStreamer(
            bot,
            message.chat.id,
            drafts=message.chat.type == ChatType.PRIVATE,
            interval=draft_interval,
        )
        text = message.text
        if message.chat.type in GROUP_CHATS:
            text = without_mention(text, (await bot.me()).username)
        incoming = Incoming(
            text=text,
            telegram_user_id=user.id if user else None,
            user_name=user.full_name if user else "",
            chat_id=message.chat.id,
            telegram_message_id=message.message_id,
        )
        try:
            reply = await app.agent.handle(incoming, Events(streamer.on_text, streamer.on_tools))
        finally:
            await streamer.close()
        await send_markdown(bot, message.chat.id, reply.text)

    @router.message()
    async def on_other(message: Message, app: App) -> None:
        assert message.bot is not None
        if not await addressed(message, message.bot, app.settings.group_replies):
            return
        await send_plain(message.bot, message.chat.id, TEXT_ONLY)

    return router
