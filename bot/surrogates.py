"""Lone UTF-16 surrogates (half an emoji in JSON, undecodable terminal bytes) replaced by
U+FFFD where text comes in: nothing downstream (the database driver, the model API, Telegram)
can encode them, and one such message ended its turn with an error."""

from __future__ import annotations

import re
from typing import Any

LONE = re.compile("[\ud800-\udfff]")


def scrub(text: str) -> str:
    """`text` with each lone surrogate replaced by U+FFFD (json.loads has joined real pairs)."""
    return LONE.sub("\ufffd", text) if LONE.search(text) else text


def scrub_json(value: Any) -> Any:
    """Every string in parsed JSON (keys too) scrubbed; other values as they are."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {scrub_json(k): scrub_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [scrub_json(v) for v in value]
    return value
