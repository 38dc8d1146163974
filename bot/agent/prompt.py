"""The system prompt and the session history, trimmed to a token budget."""

from __future__ import annotations

import asyncio
import json
import logging
from datetime import datetime
from typing import Any, Protocol

from bot.llm.settings import ModelSettings
from tools.base import RequestContext
from tools.chat import ChatModel
from tools.feature import ContextProvider
from tools.tokens import estimate_tokens

log = logging.getLogger(__name__)

# The stable prefix: identical for every message of a user's sessions, so a provider's
# prefix cache (llama.cpp, OpenAI, Anthropic, DeepSeek) reuses it and the tool schemas
# after it. What changes per message goes into the newest user turn (context_block).
SYSTEM_PROMPT = """You are Sidekick, {name_part}personal assistant in Telegram.
Use your tools when they help; otherwise answer directly.
{tools}
Each user message starts with a [context] block (the time, recalled memories) and the
first one shown may carry an [earlier] block (what earlier turns said): Sidekick adds
both, not the user. Keep answers short and concrete; Markdown sparingly."""

CONTEXT_OPEN = "[context]"
CONTEXT_CLOSE = "[/context]"
EARLIER_OPEN = "[earlier]"
EARLIER_CLOSE = "[/earlier]"


def system_prompt(user_name: str, tools: list[str]) -> str:
    """The system prompt: the same bytes for every message of the user's sessions.
    `tools`: one line per offered tool, as each declares it (Registry.prompt_lines)."""
    return SYSTEM_PROMPT.format(
        name_part=f"{user_name}'s " if user_name else "a ",
        tools="\n".join(f"- {line}" for line in tools),
    )


async def provided_sections(
    providers: list[ContextProvider], ctx: RequestContext, text: str
) -> list[str]:
    """The providers' sections, side by side; one that fails is logged and left out."""
    provided = await asyncio.gather(*(p(ctx, text) for p in providers), return_exceptions=True)
    sections: list[str] = []
    for section in provided:
        if isinstance(section, BaseException):
            log.error(
                "context provider failed; answering without it",
                exc_info=(type(section), section, section.__traceback__),
            )
        elif section:
            sections.append(section)
    return sections


def context_block(now: datetime, sections: list[str]) -> str:
    """What changes per message (the time, recalled memories), for the newest user turn."""
    lines = [f"Now: {now.strftime('%A %Y-%m-%d %H:%M')} ({now.tzname() or 'UTC'})"]
    lines += [s for s in sections if s]
    return "\n\n".join([CONTEXT_OPEN, *lines, CONTEXT_CLOSE])


def with_context(history: list[dict[str, Any]], block: str) -> list[dict[str, Any]]:
    """The history with `block` before the newest user message's text (a new dict). The
    block is then kept with the turn (messages.context) and sent with it in every later
    request, so each request extends the previous one byte for byte."""
    out = list(history)
    for i in range(len(out) - 1, -1, -1):
        m = out[i]
        if m["role"] == "user":
            text = m["content"] if isinstance(m["content"], str) else ""
            out[i] = {**m, "content": joined(block, text)}
            return out
    return [*out, {"role": "user", "content": block}]


def joined(block: str, text: str) -> str:
    """A user turn as sent: its context block, then the text."""
    return f"{block}\n\n{text}"


def sent_context(history: list[dict[str, Any]]) -> str | None:
    """The context block the newest user turn was given (with_context), to keep with it."""
    for m in reversed(history):
        if m["role"] == "user":
            content = m["content"]
            if not isinstance(content, str) or not content.startswith(CONTEXT_OPEN):
                return None
            head, sep, _ = content.partition(CONTEXT_CLOSE + "\n\n")
            return head + CONTEXT_CLOSE if sep else content
    return None


def with_parts(messages: list[dict[str, Any]], parts: list[dict[str, Any]]) -> None:
    """Give the newest user message its extra content parts (images), for this call only."""
    if not parts:
        return
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if m["role"] == "user":
            # A new dict: the history dicts are shared with /context's token count.
            text = m["content"] if isinstance(m["content"], str) else ""
            messages[i] = {**m, "content": [{"type": "text", "text": text}, *parts]}
            return


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
    @property
    def context(self) -> str | None: ...


def to_openai(msg: StoredMessage) -> dict[str, Any]:
    if msg.role == "assistant":
        if not msg.tool_calls:  # an answer, also an empty one: content is required then
            return {"role": "assistant", "content": msg.content or ""}
        return {
            "role": "assistant",
            "content": msg.content or None,
            "tool_calls": json.loads(msg.tool_calls),
        }
    if msg.role == "tool":
        return {"role": "tool", "tool_call_id": msg.tool_call_id or "", "content": msg.content}
    if msg.context:  # the block it was sent with, sent again: the prefix stays the same
        return {"role": "user", "content": joined(msg.context, msg.content)}
    return {"role": "user", "content": msg.content}


def with_note(history: list[dict[str, Any]], note: str) -> list[dict[str, Any]]:
    """The history with `note` (what an earlier summary covers, which turns are not shown)
    at the cut: in front of the first turn shown. Not in the system message, whose bytes
    (and the tool schemas after them) then stay the same whatever is cut."""
    if not note or not history or not isinstance(history[0].get("content"), str):
        return history
    first = history[0]
    block = f"{EARLIER_OPEN}\n{note}\n{EARLIER_CLOSE}"
    # After the turn's own context block, where it has one: the newest turn gets its block
    # later (with_context) and must come out the same when sent again as a stored turn.
    context, sep, text = first["content"].partition(CONTEXT_CLOSE + "\n\n")
    if sep and context.startswith(CONTEXT_OPEN):
        content = joined(context + CONTEXT_CLOSE, joined(block, text))
    else:
        content = joined(block, first["content"])
    return [{**first, "content": content}, *history[1:]]


def message_cost(m: dict[str, Any]) -> int:
    """A wire message's token estimate, as trim_history counts it."""
    return estimate_tokens(json.dumps(m, ensure_ascii=False))


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
        cost = costs[i] if costs is not None else message_cost(m)
        if kept and used + cost > budget:
            break
        kept.append(m)
        used += cost
    kept.reverse()
    while len(kept) > 1 and kept[0]["role"] != "user":
        kept.pop(0)
    return kept


def without_context(content: Any) -> Any:
    """A user turn's text as the user wrote it (the context and earlier blocks taken off)."""
    if isinstance(content, str) and content.startswith(CONTEXT_OPEN):
        _, sep, content = content.partition(CONTEXT_CLOSE + "\n\n")
        if not sep:
            return ""
    if isinstance(content, str) and content.startswith(EARLIER_OPEN):
        _, sep, rest = content.partition(EARLIER_CLOSE + "\n\n")
        return rest if sep else ""
    return content


PREFIX_RESERVE = 2500  # room for the system prompt and the tool schemas
# Tokens of session history sent with each message when the model's context is not known:
# a few dozen turns, within any current model's context next to the prefix and the answer.
HISTORY_TOKEN_BUDGET = 6000
OUTPUT_RESERVE = 1024  # when LLM_MAX_OUTPUT_TOKENS is not set


def history_budget(settings: ModelSettings, context: int | None = None) -> int:
    """HISTORY_TOKEN_BUDGET, lowered to what the model's context leaves when it is known
    (`context`: LLM_CONTEXT_TOKENS or what the server says). The answer's share is capped at
    a quarter of the context: LLM_MAX_OUTPUT_TOKENS is a ceiling, and a 4k-context model
    with the 4k default would otherwise leave no room for history."""
    budget = HISTORY_TOKEN_BUDGET
    if context is None:
        context = settings.llm_context_tokens
    if context > 0:
        out = min(settings.llm_max_output_tokens or OUTPUT_RESERVE, context // 4)
        budget = min(budget, max(200, context - out - PREFIX_RESERVE))
    return budget


async def context_size(llm: ChatModel) -> int | None:
    """The model's context in tokens where the client knows it (LLM_CONTEXT_TOKENS, or what
    llama.cpp / Ollama say, asked once per model), else None."""
    try:
        return await llm.context_tokens()
    except Exception:  # a probe that fails leaves the configured budget, not the message
        log.warning("could not read the model's context size", exc_info=True)
        return None
