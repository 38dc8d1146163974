"""The token split of each user's last request, for /context."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from tools.tokens import count_payload, count_text


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


# What one request's prompt was built from, made only when counted: the system prompt with
# the recalled sections, the sections, and the history as the user wrote it.
Prompt = Callable[[], tuple[str, list[str], list[dict[str, Any]]]]


def _none() -> tuple[str, list[str], list[dict[str, Any]]]:
    return "", [], []


@dataclass
class _Request:
    """One request's prompt and its latest call's tools, counted only when someone asks:
    counting (and even assembling) every request's prompt kept the tokenizer resident and
    cost time per message, growing with the session."""

    at: datetime
    prompt: Prompt
    tools: list[dict[str, Any]] = field(default_factory=list)
    split: ContextSplit | None = None  # once counted (or evicted), the figures alone

    def counted(self) -> ContextSplit:
        if self.split is None:
            self.split = split_of(*self.prompt(), 0, self.at)
            self.prompt = _none
        self.split.tools = count_payload(self.tools)
        self.split.tool_names = [t["function"]["name"] for t in self.tools]
        return self.split


class ContextLog:
    """Per user, the last request; kept in memory (it is a diagnostic). The prompts of the
    KEEP most recent users wait uncounted; an older one's is counted when it drops out, so
    memory stays bounded and every user's figures stay those of their last request."""

    KEEP = 256

    def __init__(self) -> None:
        self._last: dict[int, _Request] = {}
        self._uncounted: OrderedDict[int, None] = OrderedDict()  # oldest first

    def record(self, user_id: int, at: datetime, prompt: Prompt) -> None:
        """A new request's prompt (at its first model call)."""
        self._last[user_id] = _Request(at, prompt)
        self._uncounted[user_id] = None
        self._uncounted.move_to_end(user_id)
        if len(self._uncounted) > self.KEEP:
            oldest, _ = self._uncounted.popitem(last=False)
            self._last[oldest].counted()

    def has(self, user_id: int) -> bool:
        return user_id in self._last

    def set_tools(self, user_id: int, schemas: list[dict[str, Any]]) -> None:
        """The tools payload of the request's latest model call, counted when asked."""
        self._last[user_id].tools = schemas

    def get(self, user_id: int) -> ContextSplit | None:
        req = self._last.get(user_id)
        if req is None:
            return None
        self._uncounted.pop(user_id, None)
        return req.counted()
