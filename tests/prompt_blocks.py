"""The blocks the agent puts in front of a user turn (bot/agent/prompt.py), read back out of
a request the fake model received."""

from __future__ import annotations

from typing import Any

from bot.agent.prompt import CONTEXT_CLOSE, CONTEXT_OPEN, EARLIER_CLOSE, EARLIER_OPEN


def earlier_of(content: str) -> str:
    """The [earlier] note a user turn carries ('' when none)."""
    start = content.find(EARLIER_OPEN)
    end = content.find(EARLIER_CLOSE)
    return content[start + len(EARLIER_OPEN) : end].strip() if 0 <= start < end else ""


def context_of(messages: list[dict[str, Any]]) -> str:
    """The context block the newest user turn carries ('' when none)."""
    for m in reversed(messages):
        if m["role"] == "user" and isinstance(m["content"], str):
            head, sep, _ = m["content"].partition(CONTEXT_CLOSE)
            return head + sep if head.startswith(CONTEXT_OPEN) else ""
    return ""
