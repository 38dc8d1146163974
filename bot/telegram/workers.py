"""Several webhook workers on one PostgreSQL database: each update handled once, one chat's
updates one at a time across workers.

Telegram retries a webhook call that failed or timed out, and a load balancer may hand the
retry to another worker: the update id is claimed in the database first (durable
de-duplication), then the chat's advisory lock is held while the update is handled, so a
second worker waits for the first to finish that chat; and an update whose chat has an
earlier one claimed by another worker, not yet done, waits for it (update id order).
Inside one worker,
ChatOrderMiddleware (outside this one) already keeps arrival order, so at most one task per
chat and worker waits on the database lock. Long polling stays single-worker: Telegram
itself refuses a second getUpdates consumer (409 Conflict)."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from typing import Any

from aiogram import BaseMiddleware
from aiogram.types import TelegramObject, Update

from bot.telegram.middlewares import UNORDERED, Handler, chat_key
from db.engine import SessionFactory
from db.locks import Locks
from db.repos import updates
from tools.base import Clock

log = logging.getLogger(__name__)

PRUNE_EVERY = 1000  # claims between two deletions of old ones
KEEP_CLAIMS = timedelta(days=2)  # Telegram stops retrying an update well within this
# An earlier update claimed this long ago and still not done belongs to a worker that died
# mid-turn: the chat goes on without it.
ABANDONED = timedelta(minutes=2)
WAIT_S = 0.05  # pause before looking again for an earlier update in another worker's hands


class UpdateOnceMiddleware(BaseMiddleware):
    """One webhook process (SQLite): the update id is claimed before handling, so an update
    Telegram sends again (it retries a call that timed out or failed) is answered once,
    also across a restart. Chat order needs nothing more here: ChatOrderMiddleware has it."""

    def __init__(self, sf: SessionFactory, clock: Clock) -> None:
        self.sf = sf
        self.clock = clock
        self._claims = 0

    async def claim(self, event: Update) -> bool:
        """Take the update for this process; False when it was taken before (a retry, or
        another worker's). Old claims are pruned now and then."""
        now = self.clock()
        if not await updates.claim(self.sf, event.update_id, chat_key(event), now):
            log.info("update %d was already taken (a retry or another worker's)", event.update_id)
            return False
        self._claims += 1
        if self._claims % PRUNE_EVERY == 0:
            await updates.prune(self.sf, now - KEEP_CLAIMS)
        return True

    async def __call__(self, handler: Handler, event: TelegramObject, data: dict[str, Any]) -> Any:
        if not isinstance(event, Update):
            return await handler(event, data)
        if not await self.claim(event):
            return None
        # No `finish` write: only workers ordering a chat across processes read `done`.
        return await handler(event, data)


class WorkerOrderMiddleware(UpdateOnceMiddleware):
    """Several workers (PostgreSQL): claimed once as above, then a chat's updates in order
    across processes."""

    def __init__(self, locks: Locks, sf: SessionFactory, clock: Clock) -> None:
        super().__init__(sf, clock)
        self.locks = locks

    async def __call__(self, handler: Handler, event: TelegramObject, data: dict[str, Any]) -> Any:
        if not isinstance(event, Update):
            return await handler(event, data)
        if not await self.claim(event):
            return None
        key = chat_key(event)
        try:
            # A command answered while the chat's turn waits for a question (that turn
            # holds the chat's lock: ChatOrderMiddleware) goes out of turn.
            if key is None or data.get(UNORDERED):
                return await handler(event, data)
            while True:
                async with self.locks.hold("chat", key):
                    # An earlier update of this chat taken by another worker goes first.
                    since = self.clock() - ABANDONED
                    if not await updates.earlier_pending(self.sf, key, event.update_id, since):
                        return await handler(event, data)
                await asyncio.sleep(WAIT_S)
        finally:
            await updates.finish(self.sf, event.update_id)
