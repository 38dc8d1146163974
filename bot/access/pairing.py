"""Pairing, the stranger's side: what someone who is not let in hears, when the owner is
asked about them (Allow / Deny), and the owner learned from the owner code while there is
none. The Telegram adapter (bot/telegram/middlewares.py) asks here and sends what it is
told; sending the owner the request is the one thing it does for this module (`AskOwner`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from bot.access import repo
from bot.access.commands import request_answer
from bot.access.gate import AccessList, carries_code
from bot.access.models import AccessEntry
from bot.ops.envfile import set_values
from db.engine import SessionFactory
from tools.base import Clock
from tools.feature import Answer

log = logging.getLogger(__name__)

# Chats told an outcome, so each hears it once; forgotten all at once past this many (a
# crowd of strangers cannot grow it without bound).
MAX_REMEMBERED = 10_000

AskOwner = Callable[[int, Answer], Awaitable[bool]]
"""Send the owner (their Telegram id) a request with its buttons; False when they cannot be
reached (they never opened a chat with the bot)."""


@dataclass(frozen=True)
class Stranger:
    """Someone not let in who wrote to the bot: privately (`group` None), or in a group,
    which is then what the owner is asked to admit (`group`: its title)."""

    user_id: int
    name: str
    chat_id: int  # where they hear the outcome: their private chat, or the group
    group: str | None = None


def refusal_text(user_id: int) -> str:
    return (
        "This is a private Sidekick bot, so I can't answer you.\n"
        f"Your Telegram user id is {user_id}.\n"
        "If this is your bot, add this line to its .env file and restart it "
        "(separate several ids with commas):\n"
        f"ALLOWED_USER_IDS={user_id}"
    )


def asked_text(user_id: int, group: bool) -> str:
    """A stranger's answer when the owner was asked: their id stays in it (and the line to
    add), for an owner who is locked out of their own bot."""
    what = "to admit this group" if group else "to let you in"
    return (
        f"This is a private Sidekick bot. I asked its owner {what}; "
        "you will hear from me here when they answer.\n"
        f"Your Telegram user id is {user_id}.\n"
        f"If this is your bot, add ALLOWED_USER_IDS={user_id} to its .env and restart it."
    )


def no_owner_text(user_id: int) -> str:
    return (
        "This Sidekick bot has no owner yet. If it is yours, send me the owner code: "
        "`sidekick run` prints it when it starts, and `sidekick setup` shows it.\n"
        f"Your Telegram user id is {user_id}.\n"
        f"Or add ALLOWED_USER_IDS={user_id} to its .env and restart it."
    )


def full_text(waiting: int) -> str:
    return (
        f"I turned away a request to talk to me: {waiting} requests wait for your answer "
        "already. Answer them in /users (each Deny frees a place); /users also counts "
        "the requests turned away until then."
    )


CODE_KEPT_OUT = (
    "That message carried this bot's owner code, so I kept it out of our conversation: "
    "nothing of it reached the model or my memory. Send it again without the code."
)


def owner_text(user_id: int, written: Path | None) -> str:
    where = (
        f"I wrote ALLOWED_USER_IDS={user_id} to {written}."
        if written is not None
        else f"Add ALLOWED_USER_IDS={user_id} to the bot's .env to keep it so."
    )
    return (
        "You are this bot's owner now: you sent its owner code while ALLOWED_USER_IDS "
        f"was empty. {where} Anyone else who messages me asks you first."
    )


class Pairing:
    """One per adapter: it remembers which chat was told which outcome."""

    def __init__(
        self,
        access: AccessList,
        sf: SessionFactory,
        clock: Clock,
        code: str | None,
        env_file: Path | None,
    ) -> None:
        self.access = access
        self._sf = sf
        self._clock = clock
        self.code = code  # the owner code (gate.py owner_code); None: no token
        self._env_file = env_file
        self._told: dict[int, str] = {}  # chat id -> the last outcome it was told
        self._asking = asyncio.Lock()

    async def claim(self, user_id: int, name: str, text: str) -> str | None:
        """While nobody owns the bot: a private message that carries the owner code makes
        its sender the owner (kept in .env as ALLOWED_USER_IDS when there is one). What to
        tell them; None when the message has no code or someone else was quicker."""
        if not carries_code(self.code, text):
            return None
        if not await self.access.learn_owner(user_id, name, self._clock()):
            return None
        env, written = self._env_file, None
        if env is not None and env.is_file():
            try:
                set_values(env, {"ALLOWED_USER_IDS": str(user_id)})
                written = env
            except OSError as exc:
                log.warning("could not write the owner to %s: %s", env, exc)
        log.warning("user id %s is the owner now (first private message)", user_id)
        return owner_text(user_id, written)

    def unowned(self, user_id: int) -> str | None:
        """A private message without the code while nobody owns the bot: what to tell its
        sender, once."""
        return self._once(user_id, "no owner", no_owner_text(user_id))

    async def knock(self, who: Stranger, ask_owner: AskOwner) -> str | None:
        """A stranger's message: their request is recorded and, when it is new and within
        the hourly limit, the owner is asked. What they hear; None when they were told
        already (or a request of theirs is still open)."""
        group = who.group is not None
        owner = await self.access.owner()
        outcome = "no owner"
        if owner is not None:
            kind = "group" if group else "user"
            name = who.group if who.group is not None else who.name
            # One at a time: strangers' chats run concurrently, and two requests counted
            # at once would both pass the hourly cap (across workers it may overshoot by one
            # per worker, which a rate limit can bear).
            async with self._asking:
                outcome = await repo.request(
                    self._sf, who.chat_id, kind, name, who.user_id, self._clock()
                )
            if outcome == "full":
                await self._turned_away(who.chat_id, owner, ask_owner)
            if outcome == "asked":
                self.access.told_full = False
                entry = AccessEntry(chat_id=who.chat_id, kind=kind, name=name)
                asker = f"{who.name} (Telegram id {who.user_id})"
                if not await ask_owner(owner, request_answer(entry, asker)):
                    outcome = "owner unreachable"
        if outcome == "pending":
            return None
        said = asked_text(who.user_id, group) if outcome == "asked" else refusal_text(who.user_id)
        return self._once(who.chat_id, outcome, said)

    async def _turned_away(self, chat_id: int, owner: int, ask_owner: AskOwner) -> None:
        """A request dropped as the queue is full: counted for /users, and the owner told
        once until the queue has room again (a crowd cannot flood them with these either)."""
        if len(self.access.turned_away) < MAX_REMEMBERED:
            self.access.turned_away.add(chat_id)
        if not self.access.told_full:
            # Set before the send: strangers' chats run concurrently, and two turned away
            # while the first notice is on its way would each tell the owner (PostgreSQL).
            self.access.told_full = True
            self.access.told_full = await ask_owner(owner, Answer(full_text(repo.MAX_WAITING)))

    def _once(self, chat_id: int, outcome: str, said: str) -> str | None:
        if self._told.get(chat_id) == outcome:
            return None
        if len(self._told) >= MAX_REMEMBERED:
            self._told.clear()
        self._told[chat_id] = outcome
        return said
