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
    memory_mid_days: int = Field(default=90, ge=1)
    memory_short_days: int = Field(default=14, ge=1)
    memory_recall_tokens: int = Field(default=500, ge=0)
    # Weight of the word-match stage over the best 50 candidates of a recall
    # (tools/memory/wordmatch.py, RankWeights.word_match); 0 turns it off. Unset: its
    # measured weight on SQLite, off on PostgreSQL (store.py says why).
    memory_rerank_words: float | None = Field(default=None, ge=0.0, le=10.0)
    # PostgreSQL only: the text search configuration of memory full-text search
    # ("english", "german", "simple", ...); changing it rebuilds the index at startup.
    memory_fts_language: str = Field(default="english", pattern=r"^[A-Za-z_][A-Za-z0-9_.]*$")
