"""Voice reply settings (TTS_*, and the speech endpoint shared with voice notes): the voice
feature's slice of the settings (bot/voice/feature.py)."""

from __future__ import annotations

from pydantic import field_validator

from bot.media.settings import SpeechSettings, model_at_url


class VoiceSettings(SpeechSettings):
    # Text to speech on the speech endpoint (SPEECH_BASE_URL), or `model@URL` on its own
    # (Kokoro beside a whisper server); TTS_MODEL=off turns voice replies off.
    tts_model: str = "tts-1"
    tts_voice: str = "alloy"

    @field_validator("tts_model")
    @classmethod
    def _check_tts_model(cls, value: str) -> str:
        model_at_url(value)
        return value.strip()


def speech_off(settings: VoiceSettings) -> bool:
    """TTS_MODEL=off or SPEECH_BASE_URL=off: no answer is spoken, and /voice says so."""
    return settings.tts_model.strip().lower() == "off" or settings.speech_base_url == "off"
