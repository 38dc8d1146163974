"""Who the bot still serves, as the features that act on their own ask it (a reminder fires,
an approval waits, with no message coming in by the door of bot/access). The access feature
provides ADMISSION; without it, everyone is served and only the terminal's user is owner."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

from tools.state import Key

# A person or a group was removed: their Telegram id, or the group's chat id (negative).
OnRemoval = Callable[[int], Awaitable[None]]


class Admission(Protocol):
    async def admits(self, telegram_id: int | None) -> bool:
        """Whether the bot serves this person privately now, or this group (a negative chat
        id: a group's check-in); None: the terminal's local user, always."""
        ...

    async def owner(self) -> int | None:
        """The owner's Telegram id (the first of ALLOWED_USER_IDS, else the one who sent
        the owner code), None while there is none: who decides for everyone."""
        ...

    def on_removal(self, react: OnRemoval) -> None:
        """Call `react` when the owner removes someone in this process (it must not
        raise); another worker's removal is seen by `admits` within a short while."""
        ...


ADMISSION: Key[Admission] = Key("admission")
