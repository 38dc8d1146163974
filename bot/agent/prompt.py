"""The system prompt and the session history, trimmed to a token budget."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Protocol

from tools.tokens import estimate_tokens

SYSTEM_PROMPT = """You are Sidekick, {name_part}personal assistant, chatting in Telegram.
Now: {now} ({tz}).

You have tools: use them when they help, and answer directly when they do not.
{tools}
Keep answers short and concrete.
Use Markdown sparingly: bold, lists, `code` and fenced code blocks."""


def system_prompt(user_name: str, now: datetime, sections: list[str], tools: list[str]) -> str:
    """`tools`: one line per offered tool, as each declares it (Registry.prompt_lines)."""
    name_part = f"{user_name}'s " if user_name else "a "
    text = SYSTEM_PROMPT.format(
        name_part=name_part,
        now=now.strftime("%A %Y-%m-%d %H:%M"),
        tz=now.tzname() or "UTC",
        tools="\n".join(f"- {line}" for line in tools),
    )
    return "\n\n".join([text, *[s for s in sections if s]])


class StoredMessage(Protocol):
    """What a stored message gives the prompt: an ORM Message or a history row."""

    @property
    def role(self) -> str: ...
    @property
    def content(self) -> str: ...
    @property
    def tool_calls(self) -> str | None: ...
    @property
    def tool_call_id(self) -> str | None: ...


def to_openai(msg: StoredMessage) -> dict[str, Any]:
    if msg.role == "assistant":
        out: dict[str, Any] = {"role": "assistant", "content": msg.content or None}
        if msg.tool_calls:
            out["tool_calls"] = json.loads(msg.tool_calls)
        return out
    if msg.role == "tool":
        return {"role": "tool", "tool_call_id": msg.tool_call_id or "", "content": msg.content}
    return {"role": "user", "content": msg.content}


def _cost(m: dict[str, Any]) -> int:
    return estimate_tokens(json.dumps(m, ensure_ascii=False))


def message_cost(m: dict[str, Any]) -> int:
    """A wire message's token estimate, as trim_history counts it."""
    return _cost(m)


def trim_history(
    messages: list[dict[str, Any]], budget: int, costs: list[int] | None = None
) -> list[dict[str, Any]]:
    """The newest messages that fit `budget` tokens, starting at a user message.

    Starting at a user turn keeps tool results next to the call that asked for them,
    which providers insist on. The newest message is always kept. `costs` (one per
    message, from message_cost) saves recounting messages a caller has counted before.
    """
    kept: list[dict[str, Any]] = []
    used = 0
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        cost = costs[i] if costs is not None else _cost(m)
        if kept and used + cost > budget:
            break
        kept.append(m)
        used += cost
    kept.reverse()
    while len(kept) > 1 and kept[0]["role"] != "user":
        kept.pop(0)
    return kept
