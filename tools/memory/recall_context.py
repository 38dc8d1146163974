"""Auto-recall: the user's most relevant memories as a system-prompt section, within a budget.
In a group chat only what the user said in that group: the rest is private, and the answer
is read by all."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

from tools.base import RequestContext, ToolDeps
from tools.feature import ContextProvider
from tools.memory.repo import Facts
from tools.memory.store import MEMORY, MemoryHit, MemoryStore
from tools.tokens import estimate_tokens

log = logging.getLogger(__name__)

# Prompt tokens for auto-recalled memories: the long-term facts and the few best matches,
# a small share of the history's budget.
RECALL_TOKENS = 500
LONG_LIMIT = 20  # long-term memories always offered, most certain first
HEADER = "What you remember about the user (memory ids in brackets; use them to forget):"


def _line(h: MemoryHit | Facts) -> str:
    cat = f"{h.layer}/{h.category}" if h.category else h.layer
    return f"- [#{h.id}] ({cat}) {h.content}"


def build_provider(
    store: MemoryStore, budget_tokens: int
) -> Callable[[RequestContext, str], Awaitable[str | None]]:
    async def provide(ctx: RequestContext, text: str) -> str | None:
        # In a group every member reads the answer: only what was said there goes in it.
        if budget_tokens <= 0:
            return None
        group = ctx.chat
        # One cheap read first: most users have few memories, many none. With none there
        # is nothing to recall (no embedding, no search). It reads at most LONG_LIMIT + 1
        # rows however many the user has (no count, no sort).
        alive, top_long = await store.known(user_id=ctx.user_id, limit=LONG_LIMIT, group=group)
        if not alive:
            return None

        relevant = (
            await store.recall(
                user_id=ctx.user_id, query=text, limit=30, session_id=ctx.session_id, group=group
            )
            if text.strip()
            else []
        )
        # Long-term facts first (the relevant ones, then the most certain others), then
        # the rest by relevance to the new message.
        long_hits: list[MemoryHit | Facts] = [h for h in relevant if h.layer == "long"]
        long_hits += top_long
        ordered: list[MemoryHit | Facts] = []
        seen: set[int] = set()
        for h in long_hits + [h for h in relevant if h.layer != "long"]:
            if h.id not in seen:
                seen.add(h.id)
                ordered.append(h)
        if not ordered:
            return None
        lines = [HEADER]
        used = estimate_tokens(HEADER)
        for h in ordered:
            line = _line(h)
            cost = estimate_tokens(line)
            if used + cost > budget_tokens:
                continue  # a shorter memory further down may still fit
            lines.append(line)
            used += cost
        return "\n".join(lines) if len(lines) > 1 else None

    return provide


def from_deps(deps: ToolDeps) -> ContextProvider | None:
    """The feature's context builder: auto-recall when memory is on."""
    store = deps.maybe(MEMORY)
    return None if store is None else build_provider(store, RECALL_TOKENS)
