"""Live feedback while the agent works: throttled drafts of the answer, "typing" during tools.

Drafts (sendMessageDraft) are ephemeral previews in private chats; the answer is persisted
afterwards with sendMessage by the caller, once. Draft failures never affect the answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import time
from typing import Any

from aiogram import Bot
from aiogram.enums import ChatAction

from bot.telegram.render import tail

log = logging.getLogger(__name__)

TYPING_EVERY_S = 4.5  # Telegram shows "typing" for about 5 s
# A draft waits this long (at most its interval) before it is sent, and is dropped when the
# answer is ready by then: a preview the answer replaces at once is a wasted round trip.
DRAFT_HOLD_S = 0.1
_draft_ids = itertools.count(1)


class ReplyStreamer:
    """Feeds `Events.on_text` / `Events.on_tools` of one request into Telegram."""

    def __init__(self, bot: Bot, chat_id: int, *, drafts: bool, interval: float = 0.7) -> None:
        self.bot = bot
        self.chat_id = chat_id
        self.drafts = drafts
        self.interval = interval
        # A draft id per request: updates of one draft animate, a new request starts fresh.
        self.draft_id = next(_draft_ids) % 2_000_000_000 or 1
        self._last_at = time.monotonic()  # no draft before `interval`: short answers skip it
        self._last_text = ""
        self._newest = ""  # the answer so far: what a held draft shows when it goes
        self._draft: asyncio.Task[Any] | None = None
        self._draft_sending = False  # the draft task has started its request
        self._typing: asyncio.Task[Any] | None = None
        self.drafts_sent = 0
        self.started = False  # the model has said or done something for this request

    async def on_text(self, text: str) -> None:
        self.started = True
        self._stop_typing()
        if not self.drafts or not text.strip() or text == self._last_text:
            return
        self._newest = text
        now = time.monotonic()
        if now - self._last_at < self.interval:
            return
        if self._draft is not None and not self._draft.done():
            return  # one draft in flight at a time; the next delta will catch up
        self._last_at = now
        self._draft = asyncio.create_task(self._send_draft())

    async def on_tools(self, names: list[str]) -> None:
        self.started = True
        if self._typing is None or self._typing.done():
            self._typing = asyncio.create_task(self._type())

    async def close(self) -> None:
        """Stop feedback; a draft still held is dropped, one in flight is waited for so it
        cannot land after the answer."""
        self._stop_typing()
        draft = self._draft
        if draft is None or draft.done():
            return
        if not self._draft_sending:
            draft.cancel()
            await asyncio.wait({draft})
            return
        try:
            await asyncio.wait_for(draft, 5.0)
        except (TimeoutError, asyncio.CancelledError):
            pass

    def _stop_typing(self) -> None:
        if self._typing is not None and not self._typing.done():
            self._typing.cancel()
        self._typing = None

    async def _send_draft(self) -> None:
        await asyncio.sleep(min(DRAFT_HOLD_S, self.interval))
        self._draft_sending = True
        self._last_text = self._newest
        text, entities = tail(self._newest)
        try:
            await self.bot.send_message_draft(
                self.chat_id, self.draft_id, text=text, entities=entities or None, parse_mode=None
            )
            self.drafts_sent += 1
        except Exception as exc:  # best effort: the final sendMessage carries the answer
            log.debug("draft not shown (%s); no more drafts for this answer", exc)
            self.drafts = False
        finally:
            self._draft_sending = False

    async def _type(self) -> None:
        with contextlib.suppress(Exception):
            while True:
                await self.bot.send_chat_action(self.chat_id, ChatAction.TYPING)
                await asyncio.sleep(TYPING_EVERY_S)
