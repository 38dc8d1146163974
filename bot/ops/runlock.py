"""DATA_DIR/sidekick.lock: which process owns the data folder. The kernel drops the lock
however the holder ends (kill -9 too), so a stale file never blocks a start. A second `run`
in one folder is refused (two long pollers steal each other's updates); webhook workers on
PostgreSQL hold it shared (docs/scaling.md); `restore` holds it alone. Never removed: a
process that opened it just before another unlinked it would lock a file nobody finds."""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from tools.errors import SidekickError

LOCK_FILE = "sidekick.lock"
# `sidekick status` tests the lock for an instant: a bot starting in that instant waits it out.
START_WAIT_S = 2.0
RETRY_S = 0.05


class Busy(SidekickError):
    pass


@dataclass(frozen=True)
class Running:
    pid: int | None  # None: the holder has not written it (yet)
    since: datetime | None
    command: str = "run"  # or "restore"


def _open(data_dir: Path) -> int:
    data_dir.mkdir(parents=True, exist_ok=True)
    # Not inherited by the processes the bot starts (code runs, OpenCode): an orphan left
    # behind must not keep the folder locked.
    return os.open(data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)


def _try(fd: int, shared: bool) -> bool:
    try:
        fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _read(fd: int) -> Running:
    try:
        data = json.loads(os.pread(fd, 4096, 0))
        return Running(
            int(data["pid"]), datetime.fromisoformat(data["since"]), str(data["command"])
        )
    except (OSError, ValueError, KeyError, TypeError):
        return Running(None, None)


def describe(found: Running) -> str:
    if found.pid is None:
        return "another process"
    when = f", since {found.since:%Y-%m-%d %H:%M %Z}".rstrip() if found.since else ""
    what = "Sidekick" if found.command == "run" else f"`sidekick {found.command}`"
    return f"{what} (pid {found.pid}{when})"


@contextmanager
def hold(
    data_dir: Path, now: datetime, command: str, *, shared: bool = False, wait_s: float = 0.0
) -> Iterator[None]:
    fd = _open(data_dir)
    try:
        deadline = time.monotonic() + wait_s
        while not _try(fd, shared):
            if time.monotonic() >= deadline:
                raise Busy(
                    f"{describe(_read(fd))} already uses the data folder {data_dir.resolve()}: "
                    "stop it first (`sidekick status` shows it)"
                )
            time.sleep(RETRY_S)
        record = {"pid": os.getpid(), "since": now.isoformat(), "command": command}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(record).encode() + b"\n", 0)
        yield
    finally:
        os.close(fd)  # drops the lock


def holder(data_dir: Path) -> Running | None:
    """Who holds the data folder now (None: nobody), without waiting."""
    path = data_dir / LOCK_FILE
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        if _try(fd, shared=False):
            return None  # closing the file below drops it again
        return _read(fd)
    finally:
        os.close(fd)
