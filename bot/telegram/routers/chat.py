"""What the user says to the agent: text, voice, audio, video notes, photos and documents
(alone or as an album). The answer streams as drafts and is sent once at the end
(bot/telegram/answer.py).

Three routers: plain text goes first (a message without "/" in front is no command: it
meets no command's filter); the files' one goes before the features' (a caption that starts
with "/" is a file's caption, not a command); the last catches what no other answers (a
command nobody declares goes to the agent as text). Strangers never get here (the access
middleware refuses them before any download). Each file is checked against the size limit
before it is downloaded; a file that cannot be used costs the user one sentence, and
whatever else the message had is still answered.
"""

from __future__ import annotations

import logging
from pathlib import Path

from aiogram import Bot, Router
from aiogram.types import CallbackQuery, Message, MessageEntity

from bot.app import App
from bot.media.attachments import MEDIA, MediaItem, MediaService
from bot.telegram.answer import answer, answer_text, incoming_from
from bot.telegram.files import download
from bot.telegram.groups import GROUP_CHATS, addressed, addressed_any, without_mention
from bot.telegram.middlewares import Album
from bot.telegram.outbox import Outbox
from bot.telegram.render import Item, utf16_len
from bot.voice.replies import VoiceReplies
from tools.code.files import user_key

log = logging.getLogger(__name__)

QUOTE_CHARS = 300  # of a transcript, shown back to the user
NOT_READ = (
    "I read text, voice messages, photos and documents, but not this kind of message. "
    "Please write it as text."
)


async def has_text(message: Message) -> bool:
    # An async filter on purpose: aiogram runs sync filters (F.text too) in a worker
    # thread, which costs more than the rest of the routing for every message.
    return message.text is not None


async def plain_text(message: Message) -> bool:
    return message.text is not None and not message.text.startswith("/")


def build_text_router() -> Router:
    router = Router(name="text")
    router.message(plain_text)(answer_text)  # the handler is the answer: one step less to read
    return router


def build_router() -> Router:
    router = Router(name="chat")

    router.message(has_text)(answer_text)  # a command no router answers

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


def media_item(message: Message, max_bytes: int) -> MediaItem | None:
    caption = message.caption or ""
    if message.voice is not None:
        v = message.voice
        return MediaItem("voice", v.file_id, v.file_size, "voice.ogg", v.mime_type, caption)
    if message.audio is not None:
        a = message.audio
        name = a.file_name or "audio.mp3"
        return MediaItem("audio", a.file_id, a.file_size, name, a.mime_type, caption)
    if message.video_note is not None:
        n = message.video_note
        return MediaItem("video_note", n.file_id, n.file_size, "video_note.mp4", "video/mp4")
    if message.photo:
        # The largest size under the limit (Telegram lists them smallest first).
        fitting = [p for p in message.photo if (p.file_size or 0) <= max_bytes]
        p = (fitting or message.photo)[-1]
        return MediaItem("photo", p.file_id, p.file_size, "photo.jpg", "image/jpeg", caption)
    if message.document is not None:
        d = message.document
        name = d.file_name or "document"
        return MediaItem("document", d.file_id, d.file_size, name, d.mime_type, caption)
    return None


async def has_media(message: Message) -> bool:
    # Async on purpose, like has_text: sync filters run in a worker thread.
    return bool(
        message.voice or message.audio or message.video_note or message.photo or message.document
    )


def quote(transcripts: list[str]) -> tuple[str, list[MessageEntity]]:
    text = " / ".join(transcripts)
    if len(text) > QUOTE_CHARS:
        text = text[: QUOTE_CHARS - 1].rstrip() + "…"
    text = f"🎤 {text}"
    return text, [MessageEntity(type="blockquote", offset=0, length=utf16_len(text))]


def build_media_router() -> Router:
    router = Router(name="media")

    @router.edited_message()
    async def on_edited(message: Message) -> None:
        log.info(
            "ignored an edit of message %s in chat %s (edits are not re-answered)",
            message.message_id,
            message.chat.id,
        )

    @router.message(has_media)
    async def on_media(
        message: Message,
        app: App,
        draft_interval: float,
        outbox: Outbox,
        voice: VoiceReplies | None,
        album: Album | None = None,
    ) -> None:
        bot = message.bot
        assert bot is not None
        media: MediaService = app.part(MEDIA)
        parts = await album.collect() if album is not None else [message]
        # In a group, files are for the bot only when addressed, like text (nothing
        # is downloaded otherwise); the mention is not part of the caption it reads.
        if not await addressed_any(parts, bot, app.settings.group_replies):
            return
        items = [i for m in parts if (i := media_item(m, media.max_bytes))]
        if not items:
            return
        if message.chat.type in GROUP_CHATS:
            username = (await bot.me()).username
            for item in items:
                item.caption = without_mention(item.caption, username, keep_if_empty=False)
        who = message.from_user
        key = user_key(who.id if who else None, 0)

        async def fetch(item: MediaItem, dest: Path, max_bytes: int, bot: Bot = bot) -> None:
            await download(bot, item, dest, max_bytes)

        prepared = await media.prepare(items, key, fetch)
        chat_id = message.chat.id
        for notice in prepared.notices:
            await outbox.say(chat_id, notice, message.message_id)
        if prepared.transcripts:
            text, entities = quote(prepared.transcripts)
            await outbox.send(chat_id, message.message_id, [Item("answer", text, entities)])
        if not prepared.useful:
            return
        incoming = incoming_from(message, prepared.text, prepared.kind)
        incoming.parts = prepared.parts
        await answer(message, app, incoming, draft_interval, outbox, voice)

    return router
