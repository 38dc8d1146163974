"""Several webhook workers on one PostgreSQL database: each update handled once, one chat's
updates one at a time across workers.

Telegram retries a webhook call that failed or timed out, and a load balancer may hand the
retry to another worker: the update id is claimed in the database first (durable
de-duplication, bot/telegram/middlewares.py), then the chat's advisory lock is held while the
update is handled, so a second worker waits for the first to finish that chat; and an
update whose chat has an earlier one claimed by another worker, not yet done, waits for it
(update id order). Inside one worker, ChatOrderMiddleware (outside this one) already keeps
arrival order, so at most one task per chat and worker waits on the database lock. Long
polling stays single-worker: Telegram itself refuses a second getUpdates consumer (409
Conflict)."""

from __future__ import annotations

import asyncio
import logging
from datetime import timedelta
from typing import Any

from aiogram import BaseMiddleware
from aiogram.types import TelegramObject, Update

from bot.telegram.middlewares import REPLAYED, UNORDERED, Handler, InboxMiddleware, chat_key
from db.engine import UNAVAILABLE
from db.locks import Locks
from db.repos import updates

log = logging.getLogger(__name__)

# An earlier update claimed this long ago and still not done belongs to a worker that died
# mid-turn: the chat goes on without it.
ABANDONED = timedelta(minutes=2)
WAIT_S = 0.05  # pause before looking again for an earlier update in another worker's hands


class WorkerOrderMiddleware(BaseMiddleware):
    """Several workers (PostgreSQL): a chat's updates in order across processes. The update
    was claimed and is marked done by InboxMiddleware (bot/telegram/middlewares.py)."""

    def __init__(self, locks: Locks, inbox: InboxMiddleware) -> None:
        self.locks = locks
        self.inbox = inbox

    async def __call__(self, handler: Handler, event: TelegramObject, data: dict[str, Any]) -> Any:
        key = chat_key(event) if isinstance(event, Update) else None
        # A replay holds the chat's lock already; a command answered while the chat's turn
        # waits for a question (that turn holds the lock: ChatOrderMiddleware) goes out of
        # turn.
        if key is None or data.get(REPLAYED) or data.get(UNORDERED):
            return await handler(event, data)
        assert isinstance(event, Update)
        while True:
            async with self.locks.hold("chat", key):
                # An earlier update of this chat taken by another worker goes first.
                since = self.inbox.clock() - ABANDONED
                mine = self.inbox.mine(key)
                try:
                    earlier = await updates.earlier_pending(
                        self.inbox.sf, key, event.update_id, since, mine
                    )
                except UNAVAILABLE as exc:
                    # Too busy to ask (the inbox handled the update without its copy too): the
                    # chat's lock is the order left (a worker handling an earlier update holds
                    # it), and the turn waits out a busy database once or names the problem.
                    log.warning("update %d: earlier updates not looked up (%s)",
                                event.update_id, type(exc).__name__)  # fmt: skip
                    earlier = False
                if not earlier:
                    return await handler(event, data)
            await asyncio.sleep(WAIT_S)
