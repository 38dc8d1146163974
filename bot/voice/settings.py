"""Voice reply settings (TTS_*, and the speech endpoint shared with voice notes): the voice
feature's slice of the settings (bot/voice/feature.py)."""

from __future__ import annotations

from bot.media.settings import SpeechModel, SpeechSettings


class VoiceSettings(SpeechSettings):
    # Text to speech on the speech endpoint (SPEECH_BASE_URL), or `model@URL` on its own
    # (Kokoro beside a whisper server); TTS_MODEL=off turns voice replies off.
    tts_model: SpeechModel = "tts-1"
    tts_voice: str = "alloy"


def speech_off(settings: VoiceSettings) -> bool:
    """TTS_MODEL=off or SPEECH_BASE_URL=off: no answer is spoken, and /voice says so."""
    return settings.off(settings.tts_model)
