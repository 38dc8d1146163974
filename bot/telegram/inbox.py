"""The inbox: every update is kept, in one INSERT on arrival, until it is handled.

Telegram forgets an update once it was fetched (polling confirms the offset with the next
getUpdates) or answered (webhook), but a chat's updates are handled one at a time: those
that wait behind a long turn would be lost with the process. So each update is stored
before it waits for its chat's turn (the same INSERT claims its id, so an update sent again
is handled once) and marked done when handled. At the next start, the updates of the last
RESTART_WINDOW still not done are handled again, each chat's in order, after its cut turns
(bot/telegram/resume.py: `waiting`, `take_up`), through the dispatcher like a new update.

An update whose turn had begun (its message is stored) is not handled again: the turn is
continued instead. An update a replay did not get through (the process died again) is
dropped with a line in the log, as it may be the update that takes the process down. A
clean stop cancels the updates still waiting after the grace: not done, they are taken up
at the next start. Several workers (PostgreSQL): one claims each replay (compare-and-set on
`replays`), under the chat's advisory lock.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from datetime import datetime, timedelta
from typing import Any

from aiogram import BaseMiddleware
from aiogram.types import TelegramObject, Update
from sqlalchemy.exc import DBAPIError

from bot.telegram.middlewares import REPLAYED, Handler, chat_key
from db.engine import SessionFactory
from db.repos import updates
from tools.base import Clock

log = logging.getLogger(__name__)

# Old rows are deleted at the first update after a start, then hourly: Telegram stops
# retrying an update within a day, and after a week without updates it may start its ids
# anew, at random, so a row kept that long could take a new update for one sent again.
PRUNE_EVERY = timedelta(hours=1)
KEEP_CLAIMS = timedelta(days=2)


class InboxMiddleware(BaseMiddleware):
    """Stores each update on arrival (registered right after InFlight, before an album or
    the chat's turn makes it wait), skips one stored before, marks it done when handled."""

    def __init__(self, sf: SessionFactory, clock: Clock) -> None:
        self.sf = sf
        self.clock = clock
        self._pruned: datetime | None = None
        # Per chat, the updates this process stored and has not finished (several workers
        # order only the others' updates through the database: bot/telegram/workers.py).
        self.held: dict[int, set[int]] = {}
        # Per chat, the last update to pass on: storing takes an await, and updates of one
        # chat must still reach the chat's turn (ChatOrderMiddleware) in arrival order.
        self._last: dict[int, asyncio.Future[None]] = {}

    def mine(self, chat: int) -> set[int]:
        return self.held.get(chat, set())

    async def keep(self, event: Update) -> bool:
        """Store the update; False when it was stored before (a webhook retry, another
        worker's, or fetched again by polling after a kill)."""
        now = self.clock()
        payload = event.model_dump_json(exclude_none=True)
        try:
            claimed = await updates.claim(self.sf, event.update_id, chat_key(event), now, payload)
        except DBAPIError as exc:
            # The database is busy past its timeout (or failing): the message is handled
            # without its stored copy (the turn waits out a busy database once, or names the
            # problem), rather than dropped here.
            log.warning("update %d not stored (%s): handled without a copy", event.update_id,
                        type(exc.orig).__name__ if exc.orig is not None else exc)  # fmt: skip
            return True
        if not claimed:
            log.info(
                "update %d was already taken (sent again, or another worker's)", event.update_id
            )
            return False
        if self._pruned is None or now - self._pruned >= PRUNE_EVERY:
            self._pruned = now
            await updates.prune(self.sf, now - KEEP_CLAIMS)
        return True

    async def __call__(self, handler: Handler, event: TelegramObject, data: dict[str, Any]) -> Any:
        if not isinstance(event, Update) or data.get(REPLAYED):
            return await handler(event, data)  # a replay's row is kept by take_up
        chat = chat_key(event)
        if not await self._in_order(chat, self.keep(event)):
            return None
        if chat is not None:
            self.held.setdefault(chat, set()).add(event.update_id)
        try:
            result = await handler(event, data)
        except asyncio.CancelledError:
            raise  # a clean stop cut it: not done, the next start takes it up
        except Exception:
            await self._finish(event.update_id)
            raise
        finally:
            if chat is not None:
                self._release(chat, event.update_id)
        await self._finish(event.update_id)
        return result

    async def _finish(self, update_id: int) -> None:
        """Mark it done. A database too busy for that leaves the row undone: a replay at the
        next start finds its message stored and skips it, so nothing is answered twice."""
        try:
            await updates.finish(self.sf, update_id)
        except DBAPIError as exc:
            log.warning("update %d handled, but not marked done: %s", update_id, exc.orig)

    async def _in_order(self, chat: int | None, storing: Awaitable[bool]) -> bool:
        """Store, then pass on only after the chat's earlier update passed on: the place in
        line is taken before the first await, and the handler is called right after (no
        await between), so the chat's turn sees its updates in arrival order."""
        if chat is None:
            return await storing
        before = self._last.get(chat)
        mine: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._last[chat] = mine
        try:
            kept = await storing
            if before is not None:
                await asyncio.wait({before})  # never cancels the earlier one's future
            return kept
        finally:
            mine.set_result(None)
            if self._last.get(chat) is mine:
                del self._last[chat]

    def _release(self, chat: int, update_id: int) -> None:
        held = self.held[chat]
        held.discard(update_id)
        if not held:
            del self.held[chat]
