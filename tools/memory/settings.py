"""The memory tool's settings (EMBEDDINGS*, MEMORY_*); bot/config.py reads them."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, SecretStr


class MemorySettings(BaseModel):
    # minilm: kept only to say at start-up how llama-server now serves it (embeddings.py).
    embeddings: Literal["wordllama", "openai", "minilm"] = "wordllama"
    # Unset: the LLM endpoint's URL and key (passed in by the wiring).
    embeddings_base_url: str | None = None
    embeddings_model: str | None = None
    embeddings_api_key: SecretStr | None = None
    # PostgreSQL only: the text search configuration of memory full-text search
    # ("english", "german", "simple", ...); changing it rebuilds the index at startup.
    memory_fts_language: str = Field(default="english", pattern=r"^[A-Za-z_][A-Za-z0-9_.]*$")
