"""/voice on|off|auto: whether answers also come as a voice message."""

from __future__ import annotations

from aiogram import Bot, Router
from aiogram.filters import CommandObject
from aiogram.types import Message

from bot.app import App
from bot.telegram.commands import on_command
from bot.telegram.render import send_plain
from bot.telegram.user import ChatUser, use_user
from bot.voice.replies import MODES

USAGE = "Usage: /voice on|off|auto (auto: a voice message gets a voice reply, text gets text)"
SAID = {
    "on": "From now on every answer also comes as a voice message.",
    "off": "Answers come as text only from now on.",
    "auto": "Voice messages get a voice reply, text gets text.",
}
OFF_HERE = "Voice replies are off on this bot (the admin set TTS_BASE_URL=off)."


def build_router() -> Router:
    router = use_user(Router(name="voice"))

    @router.message(on_command("voice"), flags={"command": "voice"})
    async def on_voice(
        message: Message, command: CommandObject, bot: Bot, app: App, user: ChatUser
    ) -> None:
        voice = app.voice
        if voice is None or voice.synthesizer is None:
            await send_plain(bot, message.chat.id, OFF_HERE)
            return
        arg = (command.args or "").strip().lower()
        if not arg:
            mode = await voice.mode(user.id)
            await send_plain(bot, message.chat.id, f"Voice replies: {mode}. {SAID[mode]}\n{USAGE}")
            return
        if arg not in MODES:
            await send_plain(bot, message.chat.id, USAGE)
            return
        await voice.set_mode(user.id, arg)
        await send_plain(bot, message.chat.id, SAID[arg])

    return router
