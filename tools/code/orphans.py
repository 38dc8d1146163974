"""Ending what a run left running (setsid, double fork) when no PID namespace ends it:
confine.py's relay, as the run's child subreaper, inherits every orphan of the run.
Standard library only: confine.py imports it under `python -I -S`."""

from __future__ import annotations

import os
import signal


def end_orphans() -> None:
    # As the child subreaper we inherit every orphan of the run: our children are those.
    me = os.getpid()
    for _ in range(1000):
        kids = _children(me)
        if not kids:
            return
        for kid in kids:
            try:
                os.kill(kid, signal.SIGKILL)
            except OSError:
                pass
        for _kid in kids:  # reaping them hands their own children to us
            try:
                os.waitpid(-1, 0)
            except ChildProcessError:
                break


def _children(me: int) -> list[int]:
    """Our children: the kernel's list when it keeps one, else a scan of /proc."""
    try:
        with open(f"/proc/{me}/task/{me}/children") as f:
            return [int(p) for p in f.read().split()]
    except OSError:
        return [int(p) for p in os.listdir("/proc") if p.isdigit() and _parent(int(p)) == me]


def _parent(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0
