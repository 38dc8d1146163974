"""The answer spoken, after its text: a Telegram voice message, or one sentence why not.

The text reply is already out when this runs, so a slow or failed speech service never
holds back or loses the answer.
"""

from __future__ import annotations

import logging
import time

from aiogram import Bot
from aiogram.exceptions import TelegramAPIError
from aiogram.types import BufferedInputFile

from bot.agent.runner import Incoming, Reply
from bot.app import App
from bot.telegram.outbox import Outbox
from bot.telegram.render import with_retry
from bot.voice.speech import SpeechError

log = logging.getLogger(__name__)


def answer_only(reply: Reply) -> str:
    """The answer without the notes under it (usage footer, budget warning)."""
    if reply.notes and reply.text.endswith(reply.notes):
        return reply.text[: -len(reply.notes)]
    return reply.text


async def send_voice_reply(
    bot: Bot,
    outbox: Outbox,
    chat_id: int,
    app: App,
    incoming: Incoming,
    reply: Reply,
    answered_at: float,
) -> None:
    """`answered_at`: perf_counter when the answer's last token arrived."""
    voice = app.voice
    user_id = reply.user_id
    if voice is None or incoming.telegram_user_id is None or user_id is None:
        return
    if not voice.wanted(reply.voice_mode, incoming.kind):
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
