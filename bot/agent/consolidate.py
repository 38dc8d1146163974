"""Consolidation at archive time: lasting facts a session established become memories.

The archive summariser is asked, in the same call, for the facts, preferences and plans
the user stated ("FACTS:" after the summary). Each one becomes a long-term (fact,
preference, relationship) or mid-term (goal, plan, project) memory only if the
grounding check finds its specifics in the user's own messages; it points at the user
message it came from, and the memory store's de-duplication turns a repeat into an
update. A memory of something the user never said is worse than no memory.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any, Protocol

from bot.agent.grounding import Source, check
from db.models.core import Message

log = logging.getLogger(__name__)

LAYER_OF = {
    "fact": "long",
    "preference": "long",
    "relationship": "long",
    "goal": "mid",
    "plan": "mid",
    "project": "mid",
}
MAX_FACTS = 8
MAX_FACT_CHARS = 300

PROMPT = """
Then, only if the user stated lasting things about themselves (facts, preferences, \
relationships, goals, plans, projects), add a line "FACTS:" and under it one line each: \
"- category: the fact in the third person" (category is one of fact, preference, \
relationship, goal, plan, project). Leave FACTS out when there are none."""

_FACTS = re.compile(r"^\s*\**FACTS:?\**\s*$", re.I | re.M)
_LINE = re.compile(r"^\s*[-*•]\s*([a-z]+)\s*:\s*(.+?)\s*$", re.I)
_WORDS = re.compile(r"\w{3,}")


class FactWriter(Protocol):
    async def store(
        self,
        *,
        user_id: int,
        layer: str,
        content: str,
        category: str | None = None,
        certainty: float = 1.0,
        session_id: int | None = None,
        message_id: int | None = None,
    ) -> Any: ...


@dataclass
class Fact:
    category: str
    content: str


def split(text: str) -> tuple[str, list[Fact]]:
    """The summary and the facts listed after it."""
    parts = _FACTS.split(text, maxsplit=1)
    summary = parts[0].strip()
    facts: list[Fact] = []
    if len(parts) == 2:
        for line in parts[1].splitlines():
            m = _LINE.match(line)
            if m and m[1].lower() in LAYER_OF and len(m[2]) <= MAX_FACT_CHARS:
                facts.append(Fact(m[1].lower(), m[2]))
    return summary, facts[:MAX_FACTS]


def source_message(fact: str, said: list[Message]) -> Message | None:
    """The user message sharing the most words with the fact."""
    words = {w.lower() for w in _WORDS.findall(fact)}
    best, score = None, 0
    for m in said:
        overlap = len(words & {w.lower() for w in _WORDS.findall(m.content)})
        if overlap > score:
            best, score = m, overlap
    return best


async def consolidate(
    memory: FactWriter, user_id: int, messages: list[Message], facts: list[Fact], *, names: bool
) -> int:
    """Store the grounded facts; how many were stored."""
    said = [m for m in messages if m.role == "user" and m.content.strip()]
    source = Source("\n".join(f"{m.created_at:%Y-%m-%d} {m.content}" for m in said))
    stored = 0
    for fact in facts:
        grounded = check(fact.content, source, names=names)
        origin = source_message(fact.content, said)
        if not grounded.ok or origin is None:
            why = grounded.reason() or "no user message says it"
            log.info("fact not kept (%s): %.80s", why, fact.content)
            continue
        await memory.store(
            user_id=user_id,
            layer=LAYER_OF[fact.category],
            content=fact.content,
            category=fact.category,
            certainty=0.9,  # the model's reading of the user's words, not the words
            message_id=origin.id,
        )
        stored += 1
    return stored
