"""Answers are not lost to a Telegram outage. (Messages a restart left unanswered are
continued by bot/telegram/resume.py.)

- Every reply to a chat (the agent's answers with their files, commands' replies with
  their charts, buttons and files, the error line, the wait notices) goes through `send`:
  straight to Telegram, and what Telegram does not take (5xx, 429, network) is queued with
  what was not sent yet. While a chat has queued rows its newer replies queue behind them,
  so a chat's replies arrive in the order of its messages. A courier task, woken by the
  first failure, tries again within seconds (backing off to PROBE_MAX_S) until Telegram
  takes them, each chat's in order; it also looks every IDLE_S (rows from before a start,
  or another worker's). A row counts as sent only with the message id Telegram returned
  (as reminder runs do). A Telegram outage is a warning in the log, never a traceback.
- Telegram's 429 asks the bot to wait `retry_after` seconds: until then nothing is sent
  straight, every reply queues and the courier waits it out (flood control is the bot's,
  not one chat's).
- `hand` is for what the turn cannot go on without (an approval question): it sends like
  `send` and then waits until Telegram has taken the messages, however long it is down.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
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
from aiogram.types import InlineKeyboardMarkup, MessageEntity

from bot.telegram.render import Chunk, Item, put, split_plain
from db.engine import UNAVAILABLE, SessionFactory
from db.locks import Locks
from db.repos import outbox as repo
from tools.base import Clock

log = logging.getLogger(__name__)

GIVE_UP_AFTER = timedelta(days=1)  # a reply Telegram has not taken for a day is dropped
PROBE_MAX_S = 5.0  # the longest pause between two tries while Telegram is down
IDLE_S = 60.0  # a look at the outbox now and then, with nothing queued here
PAGE = 100  # rows a pass reads at once (a queued file's bytes come with its row)
BLOCKED = "the user blocked the bot (403)"
LOOK_S = 1.0  # a wait for handed messages looks at their rows this often (another worker's)

# The Telegram errors that say "not now" rather than "never".
TRANSIENT = (TelegramNetworkError, TelegramServerError, TelegramRetryAfter)


class Undeliverable(Exception):
    """Telegram refused a handed message for good (400, 403, or a day of trying)."""

    def __init__(self, reason: str, *, blocked: bool = False) -> None:
        super().__init__(reason)
        self.blocked = blocked  # the user blocked the bot (403)


def text_items(chunks: Sequence[Chunk | str]) -> list[Item]:
    return [Item("answer", c) if isinstance(c, str) else Item("answer", c[0], c[1]) for c in chunks]


def _row(
    chat_id: int, about: int | None, kind: str, text: str, now: datetime, **extra: Any
) -> dict[str, Any]:
    """One outbox row, due now; `about`: the user's message it concerns."""
    return {"chat_id": chat_id, "telegram_message_id": about, "kind": kind, "text": text,
            "created_at": now, "deliver_after": now, "attempts": 0, **extra}  # fmt: skip


def _item_row(chat_id: int, about: int | None, item: Item, now: datetime) -> dict[str, Any]:
    kept = json.dumps([e.model_dump(exclude_none=True) for e in item.entities])
    markup = item.markup.model_dump_json(exclude_none=True) if item.markup else None
    return _row(chat_id, about, item.kind, item.text, now, entities=kept, markup=markup,
                data=item.data, filename=item.filename)  # fmt: skip


def _item(row: repo.Owed) -> Item:
    entities = [MessageEntity(**e) for e in json.loads(row.entities or "[]")]
    markup = InlineKeyboardMarkup.model_validate_json(row.markup) if row.markup else None
    kind = row.kind if row.kind in ("photo", "document") else "answer"  # notices are text
    return Item(kind, row.text, entities, markup, row.data, row.filename)


@dataclass
class Outbox:
    bot: Bot
    sf: SessionFactory
    clock: Clock
    locks: Locks | None = None  # shared ones: other workers queue and send too (PostgreSQL)
    probe_max_s: float = PROBE_MAX_S
    idle_s: float = IDLE_S
    _wake: asyncio.Event = field(default_factory=asyncio.Event)
    _pass: asyncio.Lock = field(default_factory=asyncio.Lock)
    _task: asyncio.Task[None] | None = None
    _clear: bool = False  # nothing owed to anyone: a reply may go without asking the database
    _queued: int = 0  # queue() calls so far, to tell whether one came during a pass
    _stuck: float | None = None  # the last pass stopped: Telegram is down (or asked to wait)
    _more: bool = False  # the last pass had a full page: more rows wait
    _hold_until: float = 0.0  # time.monotonic() before which Telegram asked not to be called
    _passed: asyncio.Event = field(default_factory=asyncio.Event)  # a pass sent something

    async def say(self, chat_id: int, text: str, about: int | None = None) -> bool:
        """A line as is (no formatting), split if long: a notice, an error."""
        return await self.send(chat_id, about, text_items(split_plain(text) or ["(empty)"]))

    async def send(
        self,
        chat_id: int,
        about: int | None,
        items: Sequence[Item],
        *,
        forbidden_raises: bool = False,
    ) -> bool:
        """Send a reply's messages in order; True when all went now, False when (some of)
        them were queued: Telegram did not take them, or the chat's older replies still
        wait in the outbox and these go after them."""
        if self.held() or await self._owed(chat_id):
            await self.queue(chat_id, about, items, behind=True)
            return False
        for i, item in enumerate(items):
            try:
                await put(self.bot, chat_id, item)
            except TRANSIENT as exc:
                self._note(exc)
                log.warning("reply to chat %d not sent (%s): queued", chat_id, type(exc).__name__)
                await self.queue(chat_id, about, items[i:])
                return False
            except (TelegramBadRequest, TelegramForbiddenError) as exc:
                if forbidden_raises and isinstance(exc, TelegramForbiddenError):
                    raise
                log.warning("Telegram refused a reply to chat %d: %s", chat_id, exc)
        return True

    async def hand(self, chat_id: int, about: int | None, items: Sequence[Item]) -> list[int]:
        """Send messages and wait until Telegram has taken them all, queued like any reply
        while it is down or the chat's older replies wait; their message ids. Undeliverable
        when Telegram refuses one for good; cancelled, what is still queued is withdrawn."""
        ids: list[int] = []
        rest = list(items)
        if not self.held() and not await self._owed(chat_id):
            try:
                while rest:
                    ids.append(await put(self.bot, chat_id, rest[0]))
                    rest.pop(0)
            except TRANSIENT as exc:
                self._note(exc)
                log.warning("message to chat %d not sent (%s): queued", chat_id, type(exc).__name__)
            except (TelegramBadRequest, TelegramForbiddenError) as exc:
                blocked = isinstance(exc, TelegramForbiddenError)
                raise Undeliverable(str(exc), blocked=blocked) from exc
        if not rest:
            return ids
        rows = await self.queue(chat_id, about, rest, behind=True)
        self.start()  # someone waits for these: a courier must be running
        try:
            return ids + await self._taken(rows)
        except asyncio.CancelledError:
            await asyncio.shield(self._withdraw(rows))
            raise

    async def _taken(self, rows: list[int]) -> list[int]:
        while True:
            self._passed.clear()
            async with self.sf() as s:
                found = sorted(await repo.outcomes(s, rows))
            if all(sent_at is not None for _, sent_at, _, _ in found):
                if any(message_id is None for _, _, message_id, _ in found):
                    error = next(e or "" for _, _, mid, e in found if mid is None)
                    raise Undeliverable(error, blocked=error == BLOCKED)
                return [message_id for _, _, message_id, _ in found if message_id is not None]
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._passed.wait(), LOOK_S)

    async def _withdraw(self, rows: list[int]) -> None:
        """Queued messages nobody waits for any more (the turn ended) are not sent."""
        now = self.clock()
        async with self.sf() as s, s.begin():
            for row_id, sent_at, _, _ in await repo.outcomes(s, rows):
                if sent_at is None:
                    await repo.settle(s, row_id, sent_at=now, error="withdrawn", data=None)

    def _note(self, exc: Exception) -> None:
        """A 429 holds every send for the time Telegram asked."""
        if isinstance(exc, TelegramRetryAfter):
            until = time.monotonic() + float(exc.retry_after)
            self._hold_until = max(self._hold_until, until)

    def held(self) -> bool:
        """Whether Telegram asked the bot to wait (a 429): drafts, "typing" and reactions
        wait too, as Telegram's flood control counts every call of the bot."""
        return time.monotonic() < self._hold_until

    async def queue(
        self, chat_id: int, about: int | None, items: Sequence[Item], *, behind: bool = False
    ) -> list[int]:
        """Keep messages to send when Telegram takes them, after the chat's queued ones;
        their rows."""
        self._clear = False
        self._queued += 1
        now = self.clock()
        rows = [_item_row(chat_id, about, item, now) for item in items]
        async with self.sf() as s, s.begin():
            ids = await repo.add(s, rows)
        if not behind:
            log.warning(
                "Telegram did not take a reply to chat %d: %d message(s) queued, sent when it "
                "is back",
                *(chat_id, len(rows)),
            )
        self._wake.set()
        return ids

    async def _owed(self, chat_id: int) -> bool:
        if self._clear:
            return False
        try:
            async with self.sf() as s:
                return await repo.owed(s, chat_id)
        except UNAVAILABLE as exc:
            # The database cannot say now (busy past its wait, as the inbox and the turn
            # found it): the reply goes, the error line that says so among them, rather than
            # none; an older one still queued for the chat follows it.
            log.warning("outbox: chat %d's queued replies not looked up (%s): sent now",
                        chat_id, type(exc).__name__)  # fmt: skip
            return False

    async def settled(self, chat_id: int, about: int) -> None:
        """Record that the user's message got a reply another way (the error line), so a
        restart does not ask them to send it again."""
        now = self.clock()
        async with self.sf() as s, s.begin():
            await repo.add(s, [_row(chat_id, about, "settled", "", now, sent_at=now)])

    def start(self) -> None:
        """Start the courier (idempotent): one pass now, then on a failure or every IDLE_S."""
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._courier(), name="outbox")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    async def _courier(self) -> None:
        backoff = 0.0
        while True:
            queued = self._queued
            try:
                async with contextlib.AsyncExitStack() as stack:
                    mine = True
                    if self.locks is not None:  # one worker sends at a time
                        mine = await stack.enter_async_context(self.locks.try_hold("outbox", 0))
                    if mine:
                        await self.deliver()
                    else:
                        self._stuck = self.probe_max_s
            except Exception:
                log.exception("outbox: a delivery pass failed")
                self._stuck = self.probe_max_s
            if self._stuck is not None:  # Telegram is down: try again soon, backing off
                backoff = min(self.probe_max_s, max(0.5, backoff * 2))
                await asyncio.sleep(max(backoff, self._stuck))
                continue
            backoff = 0.0
            if queued != self._queued or self._more:
                continue  # queued while the pass ran, or more than a page: those go now
            if self.locks is None:
                async with self.sf() as s:
                    owed = await repo.owed(s)
                if queued == self._queued:
                    self._clear = not owed
            await self._idle()

    async def _idle(self) -> None:
        self._wake.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), self.idle_s)

    async def deliver(self) -> int:
        """Send what is owed and due, each chat in order; how many went out. A pass stops
        at Telegram's first "not now" (`_stuck` says how long to wait); a chat Telegram
        asked to wait (429) holds every chat for that long."""
        async with self._pass:
            if self.held():  # Telegram asked to wait: nothing goes before that
                self._stuck = self._hold_until - time.monotonic()
                return 0
            now = self.clock()
            async with self.sf() as s:
                owed = await repo.pending(s, now, PAGE)
            self._stuck, self._more = None, len(owed) == PAGE
            stopped: set[int] = set()  # a chat whose earlier message is still owed waits
            sent = 0
            for row in owed:
                if row.chat_id in stopped:
                    continue
                try:
                    if await self._send(row, now):
                        sent += 1
                    else:
                        stopped.add(row.chat_id)
                except TRANSIENT as exc:
                    self._note(exc)
                    self._stuck = max(0.0, self._hold_until - time.monotonic())
                    break
        if sent:
            self._passed.set()
            log.info("outbox: %d queued message(s) delivered", sent)
        return sent

    async def _send(self, row: repo.Owed, now: datetime) -> bool:
        """Send one row: True when it went (or was given up), False when the chat waits.
        Telegram's "not now" is raised, after it is recorded."""
        try:
            message_id = await put(self.bot, row.chat_id, _item(row))
        except TelegramBadRequest:
            return await self._give_up(row, "Telegram refused the message (400)")
        except TelegramForbiddenError:
            return await self._give_up(row, BLOCKED)
        except TRANSIENT as exc:
            attempts = row.attempts + 1
            if now - row.created_at > GIVE_UP_AFTER:
                await self._give_up(row, f"{type(exc).__name__} after {attempts} attempts")
                return True
            await self._record(row.id, attempts=attempts, error=type(exc).__name__)
            raise
        await self._record(row.id, sent_at=self.clock(), message_id=message_id,
                           attempts=row.attempts + 1, error=None, data=None)  # fmt: skip
        return True

    async def _give_up(self, row: repo.Owed, error: str) -> bool:
        log.warning("outbox: message %d to chat %d given up: %s", row.id, row.chat_id, error)
        await self._record(row.id, sent_at=self.clock(), error=error, data=None)
        return True  # the chat's next message may go

    async def _record(self, row_id: int, **values: Any) -> None:
        async with self.sf() as s, s.begin():
            await repo.settle(s, row_id, **values)
