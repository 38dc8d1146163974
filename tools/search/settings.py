"""The search tool's settings (SEARXNG_URL, BRAVE_*, SEARCH_PROVIDER); bot/config.py reads them."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, Field, SecretStr, field_validator


class SearchSettings(BaseModel):
    searxng_url: str | None = None
    brave_api_key: SecretStr | None = None
    brave_api_url: str = "https://api.search.brave.com/res/v1"
    brave_rate_per_second: float = Field(default=1.0, gt=0)
    search_provider: Literal["searxng", "brave"] | None = None

    @field_validator("brave_api_url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not re.match(r"^https?://", value):
            raise ValueError("must start with http:// or https://")
        return value.rstrip("/")
