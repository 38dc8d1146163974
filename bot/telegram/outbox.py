"""Answers are not lost to a Telegram outage.

An answer Telegram does not take (5xx, 429, network, after `with_retry`'s tries) is
queued in the outbox with what was not sent yet; a per-minute job (and the startup run)
delivers queued messages when Telegram is back, each chat's in order. A row counts as
sent only with the message id Telegram returned (as reminder runs do). (Messages a
restart left unanswered are continued by bot/telegram/resume.py.)
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from aiogram import Bot
from aiogram.exceptions import (
    TelegramBadRequest,
    TelegramForbiddenError,
    TelegramNetworkError,
    TelegramRetryAfter,
    TelegramServerError,
)
from aiogram.types import MessageEntity

from bot.telegram.render import Chunk
from db.engine import SessionFactory
from db.repos import outbox as repo
from tools.base import Clock

log = logging.getLogger(__name__)

EVERY = timedelta(minutes=1)
MAX_ATTEMPTS = 60  # one a minute at first, then backing off: Telegram outages are short
MAX_BACKOFF = timedelta(minutes=30)

# The Telegram errors that say "not now" rather than "never".
TRANSIENT = (TelegramNetworkError, TelegramServerError, TelegramRetryAfter)


def _row(
    chat_id: int, about: int | None, kind: str, text: str, now: datetime, **extra: Any
) -> dict[str, Any]:
    """One outbox row, due now; `about`: the user's message it concerns."""
    return {"chat_id": chat_id, "telegram_message_id": about, "kind": kind, "text": text,
            "created_at": now, "deliver_after": now, "attempts": 0, **extra}  # fmt: skip


@dataclass
class Outbox:
    bot: Bot
    sf: SessionFactory
    clock: Clock

    async def queue(self, chat_id: int, about: int | None, chunks: list[Chunk]) -> None:
        """Keep the chunks Telegram did not take, to send when it is back."""
        now = self.clock()
        rows = []
        for text, entities in chunks:
            kept = json.dumps([e.model_dump(exclude_none=True) for e in entities])
            rows.append(_row(chat_id, about, "answer", text, now, entities=kept))
        async with self.sf() as s, s.begin():
            await repo.add(s, rows)
        log.warning(
            "Telegram did not take an answer to chat %d: %d message(s) queued, sent when it "
            "is back",
            chat_id,
            len(rows),
        )

    async def settled(self, chat_id: int, about: int) -> None:
        """Record that the user's message got a reply another way (the error line), so a
        restart does not ask them to send it again."""
        now = self.clock()
        async with self.sf() as s, s.begin():
            await repo.add(s, [_row(chat_id, about, "settled", "", now, sent_at=now)])

    def job_spec(self) -> tuple[str, str, timedelta, Callable[[], Awaitable[Any]]]:
        return ("outbox", "deliver answers Telegram did not take", EVERY, self.deliver)

    async def deliver(self) -> int:
        """Send what is owed and due, each chat in order; how many went out."""
        now = self.clock()
        async with self.sf() as s:
            owed = await repo.pending(s, now)
        stopped: set[int] = set()  # a chat whose earlier message is still owed waits
        sent = 0
        for row in owed:
            if row.chat_id in stopped:
                continue
            if await self._send(row):
                sent += 1
            else:
                stopped.add(row.chat_id)
        if sent:
            log.info("outbox: %d queued message(s) delivered", sent)
        return sent

    async def _send(self, row: repo.Owed) -> bool:
        entities = [MessageEntity(**e) for e in json.loads(row.entities or "[]")]
        try:
            msg = await self.bot.send_message(
                row.chat_id, row.text, entities=entities or None, parse_mode=None
            )
        except TelegramBadRequest:
            if entities:  # the formatting was refused: the same text, plain, next time
                await self._record(row.id, entities=None)
                return False
            return await self._give_up(row, "Telegram refused the message (400)")
        except TelegramForbiddenError:
            return await self._give_up(row, "the user blocked the bot (403)")
        except TRANSIENT as exc:
            attempts = row.attempts + 1
            if attempts >= MAX_ATTEMPTS:
                await self._give_up(row, f"{type(exc).__name__} after {attempts} attempts")
                return False
            wait = min(EVERY * 2 ** max(0, attempts - 5), MAX_BACKOFF)
            now = self.clock().replace(second=0, microsecond=0)  # on the minute: see ticks
            await self._record(row.id, attempts=attempts, error=type(exc).__name__,
                               deliver_after=now + wait)  # fmt: skip
            return False
        await self._record(row.id, sent_at=self.clock(), message_id=msg.message_id,
                           attempts=row.attempts + 1, error=None)  # fmt: skip
        return True

    async def _give_up(self, row: repo.Owed, error: str) -> bool:
        log.warning("outbox: message %d to chat %d given up: %s", row.id, row.chat_id, error)
        await self._record(row.id, sent_at=self.clock(), error=error)
        return True  # the chat's next message may go

    async def _record(self, row_id: int, **values: Any) -> None:
        async with self.sf() as s, s.begin():
            await repo.settle(s, row_id, **values)
