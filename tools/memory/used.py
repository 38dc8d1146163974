"""The memory the last answer used, for "forget that" and "that is wrong, it's X" said in the
chat: the person points at what they just read, not at an id.

The previous request of the session is read back as it was recorded: the memories it stored
(a store's "stored #N" / "updated #N"), the ones its recall calls returned, and the ones
auto-recall put in its context block ("[#N]"). A memory stored then is the one meant (the
answer was about it); otherwise the recalled memory whose words the answer repeats most, the
higher-ranked on a tie. None when the answer used none of them.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from db.models.core import Message
from tools.memory.text import words

_STORED = re.compile(r"^(?:stored|updated) #(\d+)")
_LISTED = re.compile(r"\[#(\d+)\]")


@dataclass(frozen=True)
class Turn:
    """What one recorded request said and which memories it touched, in order."""

    answer: str
    stored: list[int]
    recalled: list[int]


async def previous_turn(s: AsyncSession, session_id: int, before_id: int) -> Turn | None:
    """The session's request answered before message `before_id` (the current user message),
    as recorded; None when there is none."""
    answer = (
        await s.execute(
            select(Message.request_id, Message.content)
            .where(
                Message.session_id == session_id,
                Message.id < before_id,
                Message.role == "assistant",
                Message.tool_calls.is_(None),
            )
            .order_by(Message.id.desc())
            .limit(1)
        )
    ).first()
    if answer is None:
        return None
    request_id, text = answer
    rows = (
        await s.execute(
            select(Message.role, Message.content, Message.context, Message.tool_name)
            .where(Message.session_id == session_id, Message.request_id == request_id)
            .order_by(Message.id)
        )
    ).all()
    stored: list[int] = []
    recalled: list[int] = []
    for role, content, context, tool in rows:
        if role == "user" and context:
            recalled += [int(i) for i in _LISTED.findall(context)]
        elif role == "tool" and tool == "memory":
            if (m := _STORED.match(content)) is not None:
                stored.append(int(m.group(1)))
                continue
            recalled += _ids_in(content)
    return Turn(text, stored, recalled)


def _ids_in(result: str) -> list[int]:
    try:
        found = json.loads(result)
    except ValueError:
        return []
    if not isinstance(found, dict) or not isinstance(found.get("memories"), list):
        return []
    return [int(m["id"]) for m in found["memories"] if isinstance(m, dict) and "id" in m]


def pick(turn: Turn, contents: dict[int, str]) -> int | None:
    """The memory the answer used among those it touched that still exist (`contents`)."""
    for mid in reversed(turn.stored):
        if mid in contents:
            return mid
    said = set(words(turn.answer))
    best, best_overlap = None, 0
    for mid in dict.fromkeys(turn.recalled):  # first seen: the higher-ranked
        if mid not in contents:
            continue
        overlap = len(said & set(words(contents[mid])))
        if overlap > best_overlap:
            best, best_overlap = mid, overlap
    return best
