"""Waiting in tests: poll with a generous deadline, never sleep-and-assert. CI runs on two
busy cores, so what takes milliseconds here may take seconds there."""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable

Check = Callable[[], bool | Awaitable[bool]]


async def polled(check: Check, deadline_s: float = 60.0, every_s: float = 0.05) -> bool:
    """Whether `check` came true before the deadline."""
    end = time.monotonic() + deadline_s
    while True:
        got = check()
        if await got if inspect.isawaitable(got) else got:
            return True
        if time.monotonic() > end:
            return False
        await asyncio.sleep(every_s)


async def until(check: Check, what: str = "the condition", deadline_s: float = 60.0) -> None:
    """Wait for `check`; a failure naming `what` when it never comes true."""
    assert await polled(check, deadline_s), f"never happened in {deadline_s:g} s: {what}"
