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


class MediaSettings(BaseModel):
    # Speech to text: an OpenAI-compatible /audio/transcriptions endpoint. Empty base URL
    # and key mean "the LLM endpoint's"; TRANSCRIBE_BASE_URL=off turns voice off.
    transcribe_base_url: str | None = None
    transcribe_api_key: SecretStr | None = None
    transcribe_model: str = "whisper-1"

    @field_validator("transcribe_base_url")
    @classmethod
    def _check_url(cls, value: str | None) -> str | None:
        return off_or_url(value)
