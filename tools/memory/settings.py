"""The memory tool's settings (EMBEDDINGS*); bot/config.py reads them."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, SecretStr


class MemorySettings(BaseModel):
    # minilm: kept only to say at start-up how llama-server now serves it (embeddings.py).
    embeddings: Literal["wordllama", "openai", "minilm"] = "wordllama"
    # Unset: the LLM endpoint's URL and key (passed in by the wiring).
    embeddings_base_url: str | None = None
    embeddings_model: str | None = None
    embeddings_api_key: SecretStr | None = None
