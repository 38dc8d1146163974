"""/voice on|off|auto: whether answers also come as a voice message. Only Telegram speaks
the answer (bot/telegram/answer.py), so only Telegram answers the command."""

from __future__ import annotations

from bot.voice import repo
from bot.voice.replies import VOICE
from bot.voice.repo import MODES
from bot.voice.settings import VoiceSettings, speech_off
from tools.feature import CommandCall

USAGE = "Usage: /voice on|off|auto (auto: a voice message gets a voice reply, text gets text)"
SAID = {
    "on": "From now on every answer also comes as a voice message.",
    "off": "Answers come as text only from now on.",
    "auto": "Voice messages get a voice reply, text gets text.",
}
OFF_HERE = "Voice replies are off on this bot (its admin set TTS_MODEL=off or SPEECH_BASE_URL=off)."


async def voice(call: CommandCall) -> str:
    deps = call.host.deps
    if speech_off(deps.settings_for(VoiceSettings)):
        return OFF_HERE
    arg = call.args.strip().lower()
    user_id = call.who.user_id
    if not arg:
        async with deps.session_factory() as s:
            mode = await repo.mode_of(s, user_id)
        return f"Voice replies: {mode}. {SAID[mode]}\n{USAGE}"
    chosen = next((m for m in MODES if m == arg), None)
    if chosen is None:
        return USAGE
    async with deps.session_factory() as s, s.begin():
        await repo.set_mode(s, user_id, chosen)
    if call.host.has(VOICE):
        call.host.part(VOICE).forget(user_id)  # once committed: the next answer reads it
    return SAID[chosen]
