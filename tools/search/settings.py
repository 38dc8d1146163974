"""The search tool's settings (SEARXNG_URL, BRAVE_*, SEARCH_PROVIDER); bot/config.py reads them."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, SecretStr


class SearchSettings(BaseModel):
    searxng_url: str | None = None
    brave_api_key: SecretStr | None = None
    search_provider: Literal["searxng", "brave"] | None = None
