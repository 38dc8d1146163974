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
    parts: dict[str, Any], tools_tokens: int, names: list[str], at: datetime
) -> ContextSplit:
    """`parts` is what the runner put in ctx.state["prompt_parts"]: system, sections, history."""
    system_text = str(parts.get("system", ""))
    sections = [str(s) for s in parts.get("sections", [])]
    memory = sum(count_text(s) for s in sections)
    history = 0
    for m in parts.get("history", []):
        content = m.get("content") or ""
        history += count_text(content if isinstance(content, str) else str(content))
        if m.get("tool_calls"):
            history += count_text(str(m["tool_calls"]))
    return ContextSplit(
        at=at,
        system=max(0, count_text(system_text) - memory),
        memory=memory,
        history=history,
        tools=tools_tokens,
        tool_names=names,
    )


class ContextLog:
    """Per user, the split of the last request; kept in memory (it is a diagnostic)."""

    def __init__(self) -> None:
        self.last: dict[int, ContextSplit] = {}

    def put(self, user_id: int, split: ContextSplit) -> None:
        self.last[user_id] = split

    def get(self, user_id: int) -> ContextSplit | None:
        return self.last.get(user_id)
