"""The answer to an approval question, whichever worker receives the press: settled in the
database, answerable only by the person whose message started the call, the first answer
standing. The doorbell wakes the asker at once when the press arrives in its own process."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator
from typing import get_args

from bot.approvals import repo
from bot.approvals.gate import DECISIONS, Approvals, Choice
from db.engine import SessionFactory
from tools.base import Clock

CHOICES: tuple[Choice, ...] = get_args(Choice)
SAID = {
    "once": "✅ Allowed once.", "denied": "🚫 Denied.",
    "always": "✅ Allowed, now and from now on when you chat with me, also after I read web "
              "pages or files; scheduled tasks still ask (/approvals revokes it).",
    repo.PENDING: "⌛ No answer in time: not run.",
    repo.CLOSED: "🚫 Closed: the owner removed this chat's access.",
}  # fmt: skip
ALWAYS_SCHEDULED = (
    "✅ Allowed, now and from now on, in chats and in scheduled tasks that run while you are "
    "away (/approvals revokes it)."
)
# The "always" button says what it covers (bot/approvals/gate.py: a chat's grant does not
# cover scheduled runs).
ALWAYS_LABEL = {False: "Always (in chats)", True: "Always (scheduled too)"}


def said(decision: str, scheduled: bool) -> str:
    if decision == "always" and scheduled:
        return ALWAYS_SCHEDULED
    return SAID.get(decision, SAID["denied"])


CLOSED = "This question is closed."
NOT_YOURS = "Not yours: only the person who asked can answer this."


def answer_data(key: int, choice: Choice) -> str:
    return f"answer:{key}:{choice}"


async def answer(
    sf: SessionFactory, clock: Clock, key: int, presser: int | None, choice: Choice
) -> str:
    found = await repo.question(sf, key)
    if found is None or found.decision != repo.PENDING:
        return CLOSED
    if found.by_telegram_id != presser:
        return NOT_YOURS
    stands = await repo.settle(sf, key, DECISIONS[choice], clock())
    return said(stands, found.scheduled) if stands == DECISIONS[choice] else CLOSED


class Doorbell:
    """The questions this process waits for: a press received here rings, and the wait looks
    at the database at once instead of at its next poll. Process-wide: a ring for another
    app's question (tests run several) only costs the waiter an early look."""

    def __init__(self) -> None:
        self._waiting: dict[int, list[asyncio.Event]] = {}

    @contextlib.contextmanager
    def waiting(self, key: int) -> Iterator[asyncio.Event]:
        event = asyncio.Event()
        self._waiting.setdefault(key, []).append(event)
        try:
            yield event
        finally:
            events = self._waiting[key]
            events.remove(event)
            if not events:
                del self._waiting[key]

    def ring(self, key: int) -> None:
        for event in self._waiting.get(key, ()):
            event.set()


DOORBELL = Doorbell()


async def close_for(approvals: Approvals, chat_id: int) -> None:
    """The owner removed this person or group: their open questions close, whichever worker
    waits for them, and so do those asked in the group here."""
    asked = [key for key, chat in approvals.waiting.items() if chat == chat_id]
    for key in await repo.close_pending(approvals.sf, chat_id, asked, approvals.clock()):
        DOORBELL.ring(key)
