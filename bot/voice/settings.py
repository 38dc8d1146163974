"""Voice reply settings (TTS_*, and the speech endpoint shared with voice notes): the voice
feature's slice of the settings (bot/voice/feature.py)."""

from __future__ import annotations

from bot.media.settings import SpeechSettings


class VoiceSettings(SpeechSettings):
    # Text to speech on the speech endpoint (SPEECH_BASE_URL); TTS_MODEL=off turns voice
    # replies off.
    tts_model: str = "tts-1"
    tts_voice: str = "alloy"


def speech_off(settings: VoiceSettings) -> bool:
    """TTS_MODEL=off or SPEECH_BASE_URL=off: no answer is spoken, and /voice says so."""
    return settings.tts_model.strip().lower() == "off" or settings.speech_base_url == "off"
