"""Drafts while an answer streams: a preview the answer would replace at once is never sent."""

from __future__ import annotations

import asyncio
from typing import Any

from bot.telegram.answer import ReplyStreamer


class DraftBot:
    def __init__(self) -> None:
        self.drafts: list[str] = []

    async def send_message_draft(self, chat_id: int, draft_id: int, **kw: Any) -> bool:
        self.drafts.append(kw["text"])
        return True


async def test_an_answer_ready_within_the_hold_sends_no_draft() -> None:
    bot = DraftBot()
    streamer = ReplyStreamer(bot, 1, drafts=True, interval=0.05)  # type: ignore[arg-type]
    await asyncio.sleep(0.06)  # the model took longer than the interval to start
    await streamer.on_text("the whole answer")
    await streamer.close()  # and it was complete at once
    await asyncio.sleep(0.1)  # past the hold: a draft that survived would be out by now
    assert bot.drafts == []


async def test_a_held_draft_shows_the_newest_text() -> None:
    bot = DraftBot()
    streamer = ReplyStreamer(bot, 1, drafts=True, interval=0.05)  # type: ignore[arg-type]
    await asyncio.sleep(0.06)
    await streamer.on_text("Hello")
    await streamer.on_text("Hello, wor")  # during the hold
    async with asyncio.timeout(60):  # the hold ends, then the draft goes (however loaded)
        while not bot.drafts:  # noqa: ASYNC110  # polls the fake bot's list of drafts
            await asyncio.sleep(0.01)
    await streamer.close()
    assert bot.drafts == ["Hello, wor"]
