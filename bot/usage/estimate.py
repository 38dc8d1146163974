"""Token counts for a call whose provider sent no usage: our tokenizer (o200k_base)."""

from __future__ import annotations

import json
from typing import Any

from tools.chat import Completion, Usage
from tools.tokens import count_payload, count_text

PER_MESSAGE = 4  # role and separators the chat format adds to every message


def _content_tokens(content: Any) -> int:
    if isinstance(content, str):
        return count_text(content)
    if isinstance(content, list):  # content parts: count the text ones
        return sum(count_text(str(p.get("text", ""))) for p in content if isinstance(p, dict))
    return 0


def estimate(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None, out: Completion
) -> Usage:
    prompt = count_payload(tools or [])
    for m in messages:
        prompt += PER_MESSAGE + _content_tokens(m.get("content"))
        if m.get("tool_calls"):
            prompt += count_text(json.dumps(m["tool_calls"], ensure_ascii=False))
    completion = count_text(out.content)
    for c in out.tool_calls:
        completion += count_text(c.name) + count_text(c.arguments)
    return Usage(prompt_tokens=prompt, completion_tokens=completion, estimated=True)
