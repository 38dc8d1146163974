"""The allow-list the Telegram adapter asks before serving an update: ALLOWED_USER_IDS (the
seed, from .env) and who the owner let in from the chat (the access table).

The table is read into memory and kept for a short while: a change made here (Allow,
Remove) drops the copy at once; a change another worker made (several workers on
PostgreSQL) is seen within REFRESH_S, and a newly allowed person sooner, as an id that is
not in the copy makes it read again (at most once per MISS_REFRESH_S).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime

from bot.access import repo
from bot.access.models import AccessEntry
from db.engine import SessionFactory
from db.repos.core import Recipient
from tools.admission import OnRemoval
from tools.state import Key

log = logging.getLogger(__name__)

REFRESH_S = 30.0
MISS_REFRESH_S = 1.0

Tell = Callable[[Recipient, str, bool], Awaitable[object]]
"""Send a chat a message (the app's delivery; None: nobody is told, as in a test of the
list alone)."""

TOLD = {
    "allowed": "The owner let you in: go ahead, I'm listening.",
    "denied": "The owner did not let you in.",
}
GROUP_TOLD = {
    "allowed": "The owner admitted this group: mention me to talk to me.",
    "denied": "The owner did not admit this group.",
}


def owner_code(token: str) -> str:
    """The code that makes the first private sender the owner while there is none: derived
    from the bot token, so every worker and every restart agrees on it and only someone who
    can read the token (or the bot's start-up line) knows it. Without it, anyone who finds a
    freshly started bot by its @name would own it. 40 bits: not guessable by messaging."""
    digest = hmac.new(token.encode(), b"sidekick owner code", hashlib.sha256).digest()
    return base64.b32encode(digest[:5]).decode().lower()


def carries_code(code: str | None, text: str) -> bool:
    """Whether `text` holds the owner code as a word (None: no token, no code). While the
    bot has no owner the code is its key; a message that carries it is access's alone,
    never the model's or memory's (the Telegram adapter keeps it out)."""
    return code is not None and code in text.lower().split()


class AccessList:
    def __init__(self, seed: Sequence[int], sf: SessionFactory, tell: Tell | None = None) -> None:
        self.seed = tuple(seed)
        self._sf = sf
        self._tell = tell
        self._admitted: repo.Admitted | None = None
        self._read_at = 0.0
        self._lock = asyncio.Lock()
        self._on_removal: list[OnRemoval] = []
        # Requests turned away because MAX_WAITING waited (bot/access/pairing.py), not yet
        # shown in /users; and whether the owner was told since the queue last had room.
        self.turned_away: set[int] = set()  # their chat ids
        self.told_full = False

    async def _current(self, miss: bool = False) -> repo.Admitted:
        age = time.monotonic() - self._read_at
        if self._admitted is None or age > REFRESH_S or (miss and age > MISS_REFRESH_S):
            async with self._lock:
                self._admitted = await repo.admitted(self._sf)
                self._read_at = time.monotonic()
        return self._admitted

    def invalidate(self) -> None:
        self._admitted = None

    async def allows_user(self, telegram_id: int) -> bool:
        if telegram_id in self.seed:
            return True
        if telegram_id in (await self._current()).users:
            return True
        return telegram_id in (await self._current(miss=True)).users

    async def allows_group(self, chat_id: int) -> bool:
        if chat_id in (await self._current()).groups:
            return True
        return chat_id in (await self._current(miss=True)).groups

    async def admits(self, telegram_id: int | None) -> bool:
        """tools/admission.py: whom reminders, tasks and questions may still act for, and
        which groups (a negative chat id) a check-in may still go to."""
        return telegram_id is None or await self.serves(telegram_id)

    def on_removal(self, react: OnRemoval) -> None:
        self._on_removal.append(react)

    async def removed(self, chat_id: int) -> None:
        """The owner removed this person or group: the features that act on their own
        stop acting for them (each one's failure is its own: the others still run)."""
        self.invalidate()
        for react in self._on_removal:
            try:
                await react(chat_id)
            except Exception:
                log.exception("reacting to the removal of chat %s failed", chat_id)

    async def entries(self) -> list[AccessEntry]:
        """Everyone let in from the chat or waiting (the seed is `seed`)."""
        return await repo.entries(self._sf)

    async def decide(
        self, chat_id: int, state: str, by: int | None, now: datetime
    ) -> tuple[AccessEntry | None, bool]:
        """The owner's Allow, Deny or Remove (/users' buttons, the dashboard): kept, in
        effect at once, the person or group told, a removal stopping what acts for them.
        The entry as it was (None: no such entry) and whether this changed it. An id of
        the seed is .env's to change: ValueError."""
        if chat_id in self.seed:
            raise ValueError("That id is in ALLOWED_USER_IDS: remove it from .env.")
        before, changed = await repo.decide(self._sf, chat_id, state, by, now)
        self.invalidate()
        if before is None or not changed:
            return before, changed
        await self._told(before, state)
        if state == "removed":
            await self.removed(chat_id)
        return before, changed

    async def _told(self, entry: AccessEntry, state: str) -> None:
        told = (GROUP_TOLD if entry.kind == "group" else TOLD).get(state)
        if told is None or self._tell is None:
            return
        try:
            await self._tell(Recipient(0, entry.chat_id, entry.name), told, False)
        except Exception as exc:  # they blocked the bot, left the group: the decision stands
            log.info("could not tell chat %s of the owner's decision: %s", entry.chat_id, exc)

    async def serves(self, chat_id: int) -> bool:
        """A private chat (a person's id) or a group (a negative chat id) let in now."""
        return await (self.allows_group(chat_id) if chat_id < 0 else self.allows_user(chat_id))

    async def owner(self) -> int | None:
        """The first of ALLOWED_USER_IDS, else the owner learned from the first message."""
        return self.seed[0] if self.seed else (await self._current()).owner

    async def learn_owner(self, telegram_id: int, name: str, now: datetime) -> bool:
        """With no owner yet (no seed, none learned): this user becomes it; True if so."""
        if self.seed or (await self._current(miss=True)).owner is not None:
            return False
        learned = await repo.learn_owner(self._sf, telegram_id, name, now)
        self.invalidate()
        return learned


ACCESS: Key[AccessList] = Key("access.list")
