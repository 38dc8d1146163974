"""Spoken answers: /voice on|off|auto, the answer synthesised through an OpenAI-compatible
speech endpoint, converted to OGG/Opus and metered like a model call.

The Telegram adapter sends the voice message (bot/telegram/answer.py); the composition
root builds the speaker (bot/app.py's build_voice) with the meter the agent uses. The
user's mode lives in db/models/voice.py, beside the core tables: the turn's one start read
(db/repos/core.py) carries it, so no message pays a read of its own for it.
"""

from __future__ import annotations

from bot.voice import commands
from bot.voice.doctor import check
from bot.voice.settings import VoiceSettings
from db.models.voice import VoicePrefs
from tools.feature import Command, Feature

FEATURE = Feature(
    name="voice",
    settings=VoiceSettings,
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
    doctor=check,
)
