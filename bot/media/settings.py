"""Media settings (voice, images, documents), composed into bot.config.Settings."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, Field, SecretStr, field_validator

TELEGRAM_DOWNLOAD_LIMIT_MB = 20  # getFile serves files up to 20 MB


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
    transcribe_timeout_s: float = Field(default=120.0, gt=0, le=1800)
    # Images to the model: auto = try, and remember a refusal; on; off.
    llm_vision: Literal["auto", "on", "off"] = "auto"
    # Telegram photos are at most 2560 px and pass as they are; bigger images (sent as
    # files) are downscaled. Providers scale further on their side.
    image_max_side: int = Field(default=2560, ge=256, le=8192)
    # Downloads from Telegram and document text.
    media_max_mb: float = Field(default=TELEGRAM_DOWNLOAD_LIMIT_MB, gt=0)
    media_timeout_s: float = Field(default=60.0, gt=0, le=600)
    document_inline_chars: int = Field(default=8000, ge=500, le=200_000)
    document_max_pages: int = Field(default=300, ge=1, le=5000)

    @field_validator("transcribe_base_url")
    @classmethod
    def _check_url(cls, value: str | None) -> str | None:
        return off_or_url(value)
