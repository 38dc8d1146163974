"""Spacing calls to a rate-limited API (Brave's plans allow N requests per second).

Clock and sleep are injected so tests can check the spacing without waiting.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

MonoClock = Callable[[], float]
Sleep = Callable[[float], Awaitable[None]]


class Spacer:
    """Lets one call through every 1/rate seconds; callers queue in order."""

    def __init__(
        self,
        rate_per_second: float,
        *,
        clock: MonoClock = time.monotonic,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self.interval = 1.0 / rate_per_second
        self.clock = clock
        self.sleep = sleep
        self._next = float("-inf")
        self._lock = asyncio.Lock()

    async def acquire(self) -> None:
        async with self._lock:
            wait = self._next - self.clock()
            if wait > 0:
                await self.sleep(wait)
            self._next = max(self.clock(), self._next) + self.interval

    def hold(self, seconds: float) -> None:
        """The server said to wait (429): no call goes out before `seconds` from now."""
        self._next = max(self._next, self.clock() + seconds)
