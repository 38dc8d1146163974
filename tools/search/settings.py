"""The search tool's settings (SEARXNG_URL, BRAVE_API_KEY); bot/config.py reads them."""

from __future__ import annotations

from pydantic import BaseModel, SecretStr


class SearchSettings(BaseModel):
    searxng_url: str | None = None
    brave_api_key: SecretStr | None = None
