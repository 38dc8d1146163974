"""What a turn has seen from outside the user, read from the prompt itself: a tool result or
a document marked as outside content where it was made (tools/effects.py OUTSIDE_MARK: a
web page, search results, an MCP tool's answer, a file), a remembered page, an image. The
current turn's own tool results are added as they return (bot/agent/toolexec.py). A turn
that has seen any of it asks before writing (bot/approvals/gate.py)."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from tools.effects import OUTSIDE_MARK

IMAGE = "an image"
# Anywhere in a text: a remembered page sits inside the recall lines or a tool's JSON. Text
# that only pretends to be marked makes a turn more careful, never less.
_MARK = re.compile(re.escape(OUTSIDE_MARK) + r"([^;\]\n]{1,300})")


def marks(text: str) -> list[str]:
    """The sources of the outside content marked in `text`."""
    return [m[1].strip() for m in _MARK.finditer(text)]


def seen_outside(messages: Iterable[dict[str, Any]]) -> list[str]:
    """The sources of outside content in these wire messages (the user's and tools'; what
    the assistant said is the model's own), each once, in order."""
    found: list[str] = []
    for m in messages:
        if m.get("role") not in ("user", "tool"):
            continue
        content = m.get("content")
        if isinstance(content, str):
            found += marks(content)
        elif isinstance(content, list):  # a message with parts: text and images
            for part in content:
                if not isinstance(part, dict):
                    continue
                if part.get("type") == "image_url":
                    found.append(IMAGE)
                elif isinstance(text := part.get("text"), str):
                    found += marks(text)
    return list(dict.fromkeys(found))
