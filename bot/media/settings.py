"""Media settings (voice, images, documents): the media feature's slice of the settings
(bot/media/feature.py)."""

from __future__ import annotations

import re

from pydantic import BaseModel, SecretStr, field_validator

TELEGRAM_DOWNLOAD_LIMIT_MB = 20  # getFile serves files up to 20 MB
# In DATA_DIR: what the vision gate learned of each model (bot/llm/vision.py).
VISION_FILE = "vision.json"
# Images go to the model, and a refusal is remembered for that model (VISION_FILE), so a
# text-only model is asked once. Not a setting (LLM_VISION was): auto finds out what `on`
# or `off` made the operator say, and a new LLM_MODEL is tried afresh.
VISION_MODE = "auto"


def off_or_url(value: str | None) -> str | None:
    """An endpoint setting: empty = unset (None), `off`, or an http(s) URL without its
    trailing slash."""
    if value is None or not value.strip():
        return None
    value = value.strip()
    if value.lower() == "off":
        return "off"
    if not re.match(r"^https?://", value):
        raise ValueError("must start with http:// or https:// (or be off)")
    return value.rstrip("/")


class SpeechSettings(BaseModel):
    """The audio endpoint, shared by voice notes (speech to text) and voice replies (text to
    speech): OpenAI's audio API, and the local servers that copy it, serve both routes."""

    # An OpenAI-compatible /audio endpoint. Empty: the LLM endpoint's; off: no voice at all.
    # TRANSCRIBE_BASE_URL and TTS_BASE_URL were one each.
    speech_base_url: str | None = None
    # Empty: LLM_API_KEY when the speech endpoint is the LLM's, else none (the LLM's key
    # goes only to the LLM's own endpoint).
    speech_api_key: SecretStr | None = None

    @field_validator("speech_base_url")
    @classmethod
    def _check_url(cls, value: str | None) -> str | None:
        return off_or_url(value)

    def speech_endpoint(
        self, llm_base_url: str, llm_api_key: SecretStr | str | None
    ) -> tuple[str | None, str | None]:
        """The audio endpoint's base URL (None: SPEECH_BASE_URL=off) and the key to send."""
        if self.speech_base_url == "off":
            return None, None
        base = self.speech_base_url or llm_base_url
        if self.speech_api_key is not None:
            return base, self.speech_api_key.get_secret_value()
        llm_key = (
            llm_api_key.get_secret_value() if isinstance(llm_api_key, SecretStr) else llm_api_key
        )
        same_host = base.rstrip("/") == llm_base_url.rstrip("/")
        return base, (llm_key or None) if same_host else None


class MediaSettings(SpeechSettings):
    # Speech to text on the speech endpoint; off: voice messages are not transcribed.
    transcribe_model: str = "whisper-1"

    def transcribe_off(self) -> bool:
        """TRANSCRIBE_MODEL=off or SPEECH_BASE_URL=off: voice messages get one sentence."""
        return self.transcribe_model.strip().lower() == "off" or self.speech_base_url == "off"
