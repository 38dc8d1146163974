"""Session summaries written in the background, so /newsession answers at once. Each goes
through the Archiver's lease: one the split job writes already is a no-op here, and one cut
short by shutdown is written by the next start's split job."""

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
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def stop(self) -> None:
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)


ARCHIVE: Key[BackgroundArchive] = Key("sessions.archive")
