"""The memory tool's settings (EMBEDDINGS*); bot/config.py reads them."""

from __future__ import annotations

import re

from pydantic import BaseModel, SecretStr, field_validator

# EMBEDDINGS=openai: OpenAI's small model, the one most /v1/embeddings servers also name.
OPENAI_DEFAULT_MODEL = "text-embedding-3-small"
KEYWORDS = ("wordllama", "openai", "minilm")


class MemorySettings(BaseModel):
    # wordllama (offline, in the wheel); openai (text-embedding-3-small on an OpenAI-compatible
    # /v1/embeddings endpoint); or the name of the model to ask that endpoint for (what
    # EMBEDDINGS_MODEL was). minilm: kept only to say at start-up how llama-server now serves
    # it (embeddings.py).
    embeddings: str = "wordllama"
    # Unset: the LLM endpoint's URL and key (passed in by the wiring).
    embeddings_base_url: str | None = None
    embeddings_api_key: SecretStr | None = None

    @field_validator("embeddings")
    @classmethod
    def _check_embeddings(cls, value: str) -> str:
        value = value.strip()
        if value.lower() in KEYWORDS:
            return value.lower()
        if not re.fullmatch(r"[\w.:/@+-]+", value):
            raise ValueError(
                "must be wordllama, openai, or the name of an embeddings model (no spaces)"
            )
        return value

    @property
    def embeddings_model(self) -> str | None:
        """The model an OpenAI-compatible endpoint is asked for; None: not that kind."""
        if self.embeddings == "openai":
            return OPENAI_DEFAULT_MODEL
        return None if self.embeddings in KEYWORDS else self.embeddings
