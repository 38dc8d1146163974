"""The token split of each user's last request, for /context."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tools.tokens import count_text


@dataclass
class ContextSplit:
    at: datetime
    system: int  # the system prompt without the recalled sections
    memory: int  # sections added by context providers (memory recall, ...)
    history: int  # the conversation sent along, including this message
    tools: int  # the tools payload of the last model call
    tool_names: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return self.system + self.memory + self.history + self.tools


def split_of(
    system: str, sections: list[str], history: list[dict[str, Any]], tools_tokens: int, at: datetime
) -> ContextSplit:
    """The token split of one request: the system prompt (with `sections`, the recalled
    memory, counted apart), the history sent along, and the tools payload."""
    memory = sum(count_text(s) for s in sections)
    history_tokens = 0
    for m in history:
        content = m.get("content") or ""
        history_tokens += count_text(content if isinstance(content, str) else str(content))
        if m.get("tool_calls"):
            history_tokens += count_text(str(m["tool_calls"]))
    return ContextSplit(
        at=at,
        system=max(0, count_text(system) - memory),
        memory=memory,
        history=history_tokens,
        tools=tools_tokens,
    )


class ContextLog:
    """Per user, the split of the last request; kept in memory (it is a diagnostic)."""

    def __init__(self) -> None:
        self.last: dict[int, ContextSplit] = {}

    def put(self, user_id: int, split: ContextSplit) -> None:
        self.last[user_id] = split

    def get(self, user_id: int) -> ContextSplit | None:
        return self.last.get(user_id)
