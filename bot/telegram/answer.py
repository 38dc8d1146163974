"""One answer to one user message, as Telegram shows it: drafts while it streams ("typing"
during tools), the final Markdown, then any files, then the spoken version.

Drafts (sendMessageDraft) are ephemeral previews in private chats; the answer is persisted
afterwards with sendMessage, once. Draft failures never affect the answer. The answer and
its files go through the outbox (bot/telegram/outbox.py): what Telegram does not take (an
outage: 5xx, 429, network) is kept and sent when it is back, and while the chat has
replies queued, this one goes after them. While the model is waited for (an outage, a
stalled stream) the user gets one line that says so, the same way. The voice message
comes after the text is out, so a slow or failed speech service never holds back or loses
the answer."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from aiogram import Bot
from aiogram.enums import ChatAction, ChatType
from aiogram.exceptions import TelegramAPIError
from aiogram.types import (
    BufferedInputFile,
    InlineKeyboardButton,
    InlineKeyboardMarkup,
    Message,
)

from bot.agent.runner import Events, Incoming, Reply
from bot.app import App
from bot.telegram.files import file_items
from bot.telegram.groups import GROUP_CHATS, addressed, without_mention
from bot.telegram.held import HELD
from bot.telegram.origin import marked
from bot.telegram.outbox import Outbox, text_items
from bot.telegram.render import Item, render, tail, with_retry
from bot.voice.replies import VoiceReplies
from bot.voice.speech import SpeechError
from tools.errors import storage_problem

log = logging.getLogger(__name__)

BUSY_WAIT_S = 5.0
TYPING_EVERY_S = 4.5  # Telegram shows "typing" for about 5 s
# A draft waits this long (at most its interval) before it is sent, and is dropped when the
# answer is ready by then: a preview the answer replaces at once is a wasted round trip.
DRAFT_HOLD_S = 0.1
_draft_ids = itertools.count(1)


class ReplyStreamer:
    """Feeds `Events.on_text` / `Events.on_tools` of one request into Telegram."""

    def __init__(
        self,
        bot: Bot,
        chat_id: int,
        *,
        drafts: bool,
        interval: float = 0.7,
        held: Callable[[], bool] = lambda: False,
    ) -> None:
        self.bot = bot
        self.held = held  # Telegram asked the bot to wait (Outbox.held): nothing is shown
        self.chat_id = chat_id
        self.drafts = drafts
        self.interval = interval
        # A draft id per request: updates of one draft animate, a new request starts fresh.
        self.draft_id = next(_draft_ids) % 2_000_000_000 or 1
        self._last_at = time.monotonic()  # no draft before `interval`: short answers skip it
        self._last_text = ""
        self._newest = ""  # the answer so far: what a held draft shows when it goes
        self._draft: asyncio.Task[Any] | None = None
        self._draft_sending = False  # the draft task has started its request
        self._typing: asyncio.Task[Any] | None = None
        self.started = False  # the model has said or done something for this request

    async def on_text(self, text: str) -> None:
        self.started = True
        self._stop_typing()
        if not self.drafts or not text.strip() or text == self._last_text:
            return
        self._newest = text
        now = time.monotonic()
        if now - self._last_at < self.interval or self.held():
            return
        if self._draft is not None and not self._draft.done():
            return  # one draft in flight at a time; the next delta will catch up
        self._last_at = now
        self._draft = asyncio.create_task(self._send_draft())

    async def on_tools(self, names: list[str]) -> None:
        self.started = True
        if self._typing is None or self._typing.done():
            self._typing = asyncio.create_task(self._type())

    async def close(self) -> None:
        """Stop feedback; a draft still held is dropped, one in flight is waited for so it
        cannot land after the answer."""
        self._stop_typing()
        draft = self._draft
        if draft is None or draft.done():
            return
        if not self._draft_sending:
            draft.cancel()
            await asyncio.wait({draft})
            return
        try:
            await asyncio.wait_for(draft, 5.0)
        except (TimeoutError, asyncio.CancelledError):
            pass

    def _stop_typing(self) -> None:
        if self._typing is not None and not self._typing.done():
            self._typing.cancel()
        self._typing = None

    async def _send_draft(self) -> None:
        await asyncio.sleep(min(DRAFT_HOLD_S, self.interval))
        self._draft_sending = True
        self._last_text = self._newest
        text, entities = tail(self._newest)
        try:
            await self.bot.send_message_draft(
                self.chat_id, self.draft_id, text=text, entities=entities or None, parse_mode=None
            )
        except Exception as exc:  # best effort: the final sendMessage carries the answer
            log.debug("draft not shown (%s); no more drafts for this answer", exc)
            self.drafts = False
        finally:
            self._draft_sending = False

    async def _type(self) -> None:
        with contextlib.suppress(Exception):
            while True:
                if not self.held():
                    await self.bot.send_chat_action(self.chat_id, ChatAction.TYPING)
                await asyncio.sleep(TYPING_EVERY_S)


def incoming_from(message: Message, text: str, kind: str = "text") -> Incoming:
    user = message.from_user
    # Only a forward or a reply can carry someone else's words (a quote rides on a reply).
    others = message.forward_origin or message.reply_to_message or message.external_reply
    return Incoming(
        text=marked(message, text) if others is not None else text,
        telegram_user_id=user.id if user else None,
        user_name=user.full_name if user else "",
        chat_id=message.chat.id,
        telegram_message_id=message.message_id,
        kind=kind,
    )


async def answer_text(
    message: Message,
    app: App,
    draft_interval: float,
    outbox: Outbox,
    voice: VoiceReplies | None,
) -> None:
    """A text message's answer (the chat router's handler); in a group, only a message
    addressed to the bot, its mention taken out."""
    bot = message.bot
    assert bot is not None and message.text is not None
    text = message.text
    if message.chat.type in GROUP_CHATS:  # outside groups every message is for the bot
        if not await addressed(message, bot, app.settings.group_replies):
            return
        text = without_mention(text, (await bot.me()).username)
    await answer(message, app, incoming_from(message, text), draft_interval, outbox, voice)


async def answer(
    message: Message,
    app: App,
    incoming: Incoming,
    draft_interval: float,
    outbox: Outbox,
    voice: VoiceReplies | None,
) -> Reply:
    bot = message.bot
    assert bot is not None
    chat = message.chat.id
    private = message.chat.type == ChatType.PRIVATE
    streamer = ReplyStreamer(bot, chat, drafts=private, interval=draft_interval, held=outbox.held)
    told = False

    async def on_wait(line: str) -> None:
        nonlocal told
        HELD.add(chat)  # the chat's next messages wait for the model too: they say so
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
        HELD.discard(chat)
        await streamer.close()
    answered_at = time.perf_counter()
    if not await deliver(outbox, chat, incoming.telegram_message_id, reply):
        return reply  # queued: it goes when Telegram is back, without the spoken version
    if voice is not None:
        await send_voice_reply(bot, outbox, chat, voice, incoming, reply, answered_at)
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
    if reply.buttons:  # under the answer's last part, pressed as a feature's own buttons
        rows = [
            [InlineKeyboardButton(text=b.label, callback_data=f"{b.feature}:{b.data}")]
            for b in reply.buttons
        ]
        items[-1] = replace(items[-1], markup=InlineKeyboardMarkup(inline_keyboard=rows))
    if reply.files:
        # Several runs may write the same name: the last version is the one to send.
        latest = {name: (name, data) for name, data in reply.files}
        items += file_items(list(latest.values()))
    return await outbox.send(chat, about, items)


def answer_only(reply: Reply) -> str:
    """The answer without the notes under it (usage footer, budget warning)."""
    if reply.notes and reply.text.endswith(reply.notes):
        return reply.text[: -len(reply.notes)]
    return reply.text


async def send_voice_reply(
    bot: Bot,
    outbox: Outbox,
    chat_id: int,
    voice: VoiceReplies,
    incoming: Incoming,
    reply: Reply,
    answered_at: float,
) -> None:
    """`answered_at`: perf_counter when the answer's last token arrived."""
    user_id = reply.user_id
    if incoming.telegram_user_id is None or user_id is None:
        return
    if not await voice.wanted(user_id, incoming.kind):
        return
    try:
        await bot.send_chat_action(chat_id, "record_voice")
    except TelegramAPIError:
        pass  # only a hint
    try:
        spoken = await voice.speak(user_id, answer_only(reply), reply.request_id)
    except SpeechError as exc:
        await outbox.say(chat_id, f"No voice reply this time: {exc}; the answer is above.")
        return
    caption = (
        f"Read aloud up to about {spoken.chars:,} characters; the rest is in the text above."
        if spoken.cut
        else None
    )
    audio = BufferedInputFile(spoken.audio, filename="answer.ogg")
    try:
        await with_retry(lambda: bot.send_voice(chat_id, audio, caption=caption), "sendVoice")
    except TelegramAPIError as exc:
        # Privacy settings can forbid voice messages (VOICE_MESSAGES_FORBIDDEN).
        log.warning("sending a voice reply failed: %s", exc)
        await outbox.say(chat_id, "Telegram did not take the voice reply; the answer is above.")
        return
    log.info(
        "voice reply sent %.0f ms after the answer (%d characters)",
        (time.perf_counter() - answered_at) * 1000,
        spoken.chars,
    )
