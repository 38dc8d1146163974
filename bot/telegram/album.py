"""Albums (media groups) become one message.

Telegram delivers an album as separate updates sharing a `media_group_id`. This outermost
middleware lets the first part wait until no new part has come for `window` seconds, then
passes it on with every part in `data["album"]`; the other parts stop here. It runs before
the per-chat ordering, so the waiting first part does not hold up its own later parts.
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiogram import BaseMiddleware
from aiogram.types import Message, TelegramObject, Update

from bot.telegram.middlewares import Handler

ALBUM_WINDOW_S = 0.8
MAX_ALBUM_WAIT_S = 5.0
MAX_PARTS = 10  # Telegram's own limit for an album


class AlbumMiddleware(BaseMiddleware):
    def __init__(self, window: float = ALBUM_WINDOW_S) -> None:
        self.window = window
        self.groups: dict[tuple[int, str], list[Message]] = {}
        self.arrived: dict[tuple[int, str], asyncio.Event] = {}

    async def __call__(self, handler: Handler, event: TelegramObject, data: dict[str, Any]) -> Any:
        msg = event.message if isinstance(event, Update) else None
        if msg is None or not msg.media_group_id:
            return await handler(event, data)
        key = (msg.chat.id, msg.media_group_id)
        parts = self.groups.get(key)
        if parts is not None:  # a later part: the first one's wait picks it up
            if len(parts) < MAX_PARTS:
                parts.append(msg)
            self.arrived[key].set()
            return None
        parts = self.groups[key] = [msg]
        arrived = self.arrived[key] = asyncio.Event()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + MAX_ALBUM_WAIT_S
        try:
            while True:
                arrived.clear()
                left = min(self.window, deadline - loop.time())
                if left <= 0:
                    break
                try:
                    await asyncio.wait_for(arrived.wait(), left)
                except TimeoutError:
                    break
        finally:
            del self.groups[key], self.arrived[key]
        data["album"] = sorted(parts, key=lambda m: m.message_id)
        return await handler(event, data)
