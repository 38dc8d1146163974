"""Plain messages go to the agent; the answer streams as drafts and is sent once at the end."""

from __future__ import annotations

from aiogram import Router
from aiogram.types import CallbackQuery, Message

from bot.app import App
from bot.telegram.answer import answer, incoming_from
from bot.telegram.groups import GROUP_CHATS, addressed, without_mention
from bot.telegram.outbox import Outbox

NOT_READ = (
    "I read text, voice messages, photos and documents, but not this kind of message. "
    "Please write it as text."
)


async def has_text(message: Message) -> bool:
    # An async filter on purpose: aiogram runs sync filters (F.text too) in a worker
    # thread, which costs more than the rest of the routing for every message.
    return message.text is not None


def build_router() -> Router:
    router = Router(name="chat")

    @router.message(has_text)
    async def on_text(message: Message, app: App, draft_interval: float, outbox: Outbox) -> None:
        bot = message.bot
        assert bot is not None and message.text is not None
        if not await addressed(message, bot, app.settings.group_replies):
            return
        text = message.text
        if message.chat.type in GROUP_CHATS:
            text = without_mention(text, (await bot.me()).username)
        await answer(message, app, incoming_from(message, text), draft_interval, outbox)

    @router.message()
    async def on_other(message: Message, app: App, outbox: Outbox) -> None:
        assert message.bot is not None
        if not await addressed(message, message.bot, app.settings.group_replies):
            return
        await outbox.say(message.chat.id, NOT_READ, message.message_id)

    @router.callback_query()
    async def on_stale_button(query: CallbackQuery) -> None:
        # A button no router knows (an old format, or forged data): say so, do nothing.
        await query.answer("That button is not valid any more.", show_alert=True)

    return router
