"""Albums (media groups) become one message.

Telegram delivers an album as separate updates sharing a `media_group_id`. This middleware
runs outermost, before the per-chat ordering: the first part goes on (taking its place in
the chat's order) with an `Album` in `data["album"]`; every later part is added to that
Album and stops here, so it never waits for the chat lock the first part holds. The
handler calls `await album.collect()`, which returns once no new part has come for
`window` seconds. A message sent after the album is answered after it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from aiogram import BaseMiddleware
from aiogram.types import Message, TelegramObject, Update

from bot.telegram.middlewares import Handler

ALBUM_WINDOW_S = 0.8
MAX_ALBUM_WAIT_S = 5.0
MAX_PARTS = 10  # Telegram's own limit for an album


class Album:
    def __init__(self, first: Message, window: float, on_close: Callable[[], None]) -> None:
        self.parts = [first]
        self.window = window
        self.closed = False
        self._on_close = on_close
        self._arrived = asyncio.Event()

    def add(self, message: Message) -> None:
        if len(self.parts) < MAX_PARTS:
            self.parts.append(message)
        self._arrived.set()

    async def collect(self) -> list[Message]:
        """Every part, in order, once the album has been quiet for `window` seconds."""
        if not self.closed:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + MAX_ALBUM_WAIT_S
            while (left := min(self.window, deadline - loop.time())) > 0:
                self._arrived.clear()
                try:
                    await asyncio.wait_for(self._arrived.wait(), left)
                except TimeoutError:
                    break
            self.closed = True
            self._on_close()
        return sorted(self.parts, key=lambda m: m.message_id)


class AlbumMiddleware(BaseMiddleware):
    def __init__(self, window: float = ALBUM_WINDOW_S) -> None:
        self.window = window
        self.groups: dict[tuple[int, str], Album] = {}

    async def __call__(self, handler: Handler, event: TelegramObject, data: dict[str, Any]) -> Any:
        msg = event.message if isinstance(event, Update) else None
        if msg is None or not msg.media_group_id:
            return await handler(event, data)
        key = (msg.chat.id, msg.media_group_id)
        album = self.groups.get(key)
        if album is not None and not album.closed:
            album.add(msg)
            return None
        new = Album(msg, self.window, lambda: self._forget(key, new))
        self.groups[key] = data["album"] = new
        try:
            return await handler(event, data)
        finally:
            self._forget(key, new)

    def _forget(self, key: tuple[int, str], album: Album) -> None:
        if self.groups.get(key) is album:
            del self.groups[key]
