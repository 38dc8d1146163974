"""Session summaries written in the background: /newsession answers at once while a slow
local model takes minutes to summarise the session it closed.

The sessions feature's part (ARCHIVE), built with the app, so both adapters have it whether
or not they run the scheduler. Each
summary goes through the Archiver's lease: if the split job (or another worker) writes
that session's summary already, this one is a no-op, and a summary cut short by shutdown
releases the lease and is written by the next start's split job.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tools.state import Key

if TYPE_CHECKING:
    from bot.sessions.archive import Archiver

log = logging.getLogger(__name__)


@dataclass
class BackgroundArchive:
    archiver: Archiver | None  # None when memory is off: nowhere to archive to
    _tasks: set[asyncio.Task[None]] = field(default_factory=set, init=False)

    def archive_soon(self, session_id: int) -> bool:
        """Start archiving a closed session; False without an archiver."""
        archiver = self.archiver
        if archiver is None:
            return False

        async def run() -> None:
            try:
                result = await archiver.archive(session_id)
            except Exception:
                log.exception("archiving session %d crashed", session_id)
                return
            if not result.done:  # failed, or another writer has it: the split job follows up
                log.info("session %d: summary %s for now", session_id, result.status)

        task = asyncio.create_task(run(), name=f"archive-session-{session_id}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return True

    async def idle(self) -> None:
        """Wait for the summaries being written."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def stop(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)


ARCHIVE: Key[BackgroundArchive] = Key("sessions.archive")
