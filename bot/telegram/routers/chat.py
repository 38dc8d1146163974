"""Plain messages go to the agent; the answer streams as drafts and is sent once at the end."""

from __future__ import annotations

from aiogram import Router
from aiogram.enums import ChatType
from aiogram.types import CallbackQuery, Message

from bot.agent.runner import Events, Incoming
from bot.app import App
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
        user = message.from_user
        streamer = ReplyStreamer(
            bot,
            message.chat.id,
            drafts=message.chat.type == ChatType.PRIVATE,
            interval=draft_interval,
        )
        incoming = Incoming(
            text=message.text,
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
        await reply.delivered()

    @router.message()
    async def on_other(message: Message) -> None:
        assert message.bot is not None
        await send_plain(message.bot, message.chat.id, TEXT_ONLY)

    @router.callback_query()
    async def on_stale_button(query: CallbackQuery) -> None:
        # A button no router knows (an old format, or forged data): say so, do nothing.
        await query.answer("That button is not valid any more.", show_alert=True)

    return router
