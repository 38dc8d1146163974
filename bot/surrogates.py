"""Text from outside with lone UTF-16 surrogates made writable.

JSON may spell half of a surrogate pair ("\\ud83d" alone: a client that cut an emoji in
two), and a terminal may hand over undecodable bytes as surrogate escapes. Python keeps such
a character in a str, but nothing downstream can encode it (the database driver, the model
API, Telegram), so one such message ended its turn with an error. Each one is replaced by
U+FFFD where the text comes in, and everything after sees ordinary text."""

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
