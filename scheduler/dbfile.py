"""Noticing a SQLite database file deleted (or replaced) under the running bot: SQLite goes
on writing to the unlinked file, and the restart finds an empty database. A per-minute look
at the path's inode warns once, while the data can still be copied back from /proc/<pid>/fd."""

from __future__ import annotations

import logging
import os
from datetime import timedelta
from pathlib import Path

from scheduler.setup import JobSpec

log = logging.getLogger(__name__)

EVERY = timedelta(minutes=1)


def _inode(path: Path) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino


class DatabaseFileWatch:
    def __init__(self, path: Path) -> None:
        self.path = path.resolve()
        self.opened = _inode(self.path)
        self.warned = False

    async def check(self) -> str | None:
        now, problem = _inode(self.path), None
        if now is None:
            problem = "was deleted"
        elif self.opened is not None and now != self.opened:
            problem = "was replaced by another file"
        if problem is None:
            self.warned = False
        elif not self.warned:
            self.warned = True
            log.warning(
                "the database file %s %s while the bot runs: new data goes to a file that "
                "a restart will not find. Stop nothing yet: copy the open file back from "
                "/proc/%d/fd (ls -l shows which) or restore a backup, then restart",
                self.path,
                problem,
                os.getpid(),
            )
        return problem

    def job_spec(self) -> JobSpec:
        return ("database-file", "notice a deleted database file", EVERY, self.check)
