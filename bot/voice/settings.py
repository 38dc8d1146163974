"""Voice reply settings (TTS_*): the voice feature's slice of the settings
(bot/voice/feature.py)."""

from __future__ import annotations

from pydantic import BaseModel, SecretStr, field_validator

from bot.media.settings import off_or_url


class VoiceSettings(BaseModel):
    # Text to speech: an OpenAI-compatible /audio/speech endpoint. Empty base URL and key
    # mean "the LLM endpoint's"; TTS_BASE_URL=off turns voice replies off.
    tts_base_url: str | None = None
    tts_api_key: SecretStr | None = None
    tts_model: str = "tts-1"
    tts_voice: str = "alloy"

    @field_validator("tts_base_url")
    @classmethod
    def _check_tts_url(cls, value: str | None) -> str | None:
        return off_or_url(value)


def speech_off(settings: VoiceSettings) -> bool:
    """TTS_BASE_URL=off: no answer is spoken, and /voice says so."""
    return settings.tts_base_url == "off"
