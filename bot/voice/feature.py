"""Spoken answers: /voice on|off|auto, the answer synthesised through an OpenAI-compatible
speech endpoint, converted to OGG/Opus and metered like a model call.

The Telegram adapter sends the voice message (bot/telegram/answer.py) through this
feature's VoiceReplies (VOICE), metered by the usage feature's Meter when it is listed. The
user's mode is this feature's table, read after the answer only where speech is on.
"""

from __future__ import annotations

from bot.voice.settings import VoiceSettings
from tools.feature import Command, Feature, Host, Provide, Setup


def setup() -> Setup:
    from bot.usage.meter import METER, Meter
    from bot.voice import commands
    from bot.voice.doctor import check
    from bot.voice.models import VoicePrefs
    from bot.voice.replies import VOICE, VoiceReplies, build_voice

    async def replies(host: Host) -> VoiceReplies:
        deps = host.deps
        end = deps.endpoint
        meter: Meter | None = None
        if host.has(METER):
            meter = await host.need(METER)
        settings = deps.settings_for(VoiceSettings)
        url, key = (end.base_url, end.api_key) if end is not None else ("", None)
        return build_voice(settings, url, key, deps.http, deps.session_factory, meter)

    return Setup(
        models=(VoicePrefs,),
        commands=(
            Command(
                "voice",
                "answers as voice messages too",
                commands.voice,
                terminal=False,
                args="[on|off|auto]",
            ),
        ),
        parts=(Provide(VOICE, replies),),
        doctor=check,
    )


FEATURE = Feature(name="voice", settings=VoiceSettings, setup=setup)
