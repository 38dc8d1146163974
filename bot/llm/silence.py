"""One model call's tries watched for silence: a user waiting for the answer hears once
that the model has gone quiet, and a try that stays silent past its limit ends as stalled,
a passing failure the client tries again (bot/llm/client.py)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

from bot.llm.completion import OnText
from bot.llm.wire import Stalled

log = logging.getLogger(__name__)

STILL_WAITING = (
    "Still waiting for the model: it has gone quiet for a while. The answer follows as soon "
    "as it goes on."
)


class Silence:
    """`watch()` around each try, `heard()` on each event of it. `limit_s` without an
    event (`first_s` before the first) ends the try (Stalled); `notice_s` without one tells
    `on_wait`, once a call."""

    def __init__(
        self, limit_s: float, notice_s: float, on_wait: OnText | None, first_s: float | None = None
    ) -> None:
        self.limit_s = limit_s
        # Before a try's first event the server may still be reading the prompt: llama-server
        # sends nothing meanwhile, for minutes on a CPU, and a retry would read it again from
        # the start. `first_s` (the call's deadline) bounds that wait instead of `limit_s`.
        self.first_s = limit_s if first_s is None else first_s
        self.notice_s = notice_s
        self.on_wait = on_wait
        self.noticed = False
        self._last = 0.0
        self._cm: asyncio.Timeout | None = None
        self._telling = False

    def heard(self) -> None:
        self._last = asyncio.get_running_loop().time()
        if self._cm is not None:
            self._cm.reschedule(self._last + self.limit_s)

    @contextlib.asynccontextmanager
    async def watch(self) -> AsyncIterator[None]:
        self._last = asyncio.get_running_loop().time()
        notice: asyncio.Task[Any] | None = None
        if self.on_wait is not None and not self.noticed:
            notice = asyncio.create_task(self._notice(self.on_wait))
        cm = self._cm = asyncio.timeout_at(self._last + self.first_s)
        try:
            async with cm:
                yield
        except TimeoutError:
            if not cm.expired():
                raise
            raise Stalled(self.limit_s) from None
        finally:
            self._cm = None
            if notice is not None:
                if self._telling:  # a line half sent is finished, not cut
                    await asyncio.wait({notice})
                notice.cancel()

    async def _notice(self, on_wait: OnText) -> None:
        loop = asyncio.get_running_loop()
        # Each event moves the moment on; an Event set per streamed chunk would cost more.
        while (left := self._last + self.notice_s - loop.time()) > 0:  # noqa: ASYNC110
            await asyncio.sleep(left)
        self.noticed = self._telling = True
        try:
            await on_wait(STILL_WAITING)
        except Exception:  # the answer matters, not this line
            log.debug("the still-waiting line was not shown", exc_info=True)
        finally:
            self._telling = False
