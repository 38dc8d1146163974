"""How busy SQLite's WriteGate and the event loop's thread are while many chats write.

Runs bench/overhead.py unchanged, with db.sqlite_adapter.WriteGate.enter/leave wrapped, and
prints for its concurrent phase (from the first burst message pushed to the last gate
hand-over): the share of wall time some writer held the gate, the mean hold, and the share
of one core the event loop's thread used. A gate held most of the time beside a loop thread
near one full core says writers wait for loop turns that run other chats' work, not for the
gate: cutting hand-over hops then buys no messages per second (issue 14 note, s14-convoy).

Usage: python bench/write_gate.py [overhead.py's arguments; default --sequential 20]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import overhead

from db.sqlite_adapter import WriteGate

holds: list[tuple[float, float]] = []
since: dict[int, float] = {}
burst: list[float] = []  # perf_counter, loop thread CPU at the first burst message
last: list[float] = [0.0, 0.0]  # the same at the last gate hand-over


def _mark() -> None:
    last[:] = [time.perf_counter(), time.thread_time()]


def _instrument() -> None:
    enter, leave = WriteGate.enter, WriteGate.leave

    async def timed_enter(self: WriteGate, owner: object) -> None:
        await enter(self, owner)
        if self._holder is owner and id(owner) not in since:
            since[id(owner)] = time.perf_counter()

    def timed_leave(self: WriteGate, owner: object) -> None:
        start = since.pop(id(owner), None) if self._holder is owner else None
        leave(self, owner)
        if start is not None:
            holds.append((start, time.perf_counter()))
            _mark()

    WriteGate.enter = timed_enter  # type: ignore[method-assign]
    WriteGate.leave = timed_leave  # type: ignore[method-assign]

    make_update = overhead.message_update

    def first_burst(*args: Any, **kwargs: Any) -> Any:
        if not burst and str(args[1]).startswith("burst"):
            burst[:] = [time.perf_counter(), time.thread_time()]
        return make_update(*args, **kwargs)

    overhead.message_update = first_burst


def main() -> None:
    _instrument()
    args = sys.argv[1:] or ["--sequential", "20"]
    sys.argv = [sys.argv[0], *args]
    overhead.main()  # its event loop runs in this (the main) thread
    t0, cpu0 = burst
    wall = last[0] - t0
    held = [(max(a, t0), b) for a, b in holds if b > t0]
    total = sum(b - a for a, b in held)
    print(f"write gate over the concurrent phase ({wall:.2f} s wall):")
    print(
        f"  held {total / wall * 100:.0f}% of wall time; {len(held)} holds, "
        f"mean {total / len(held) * 1000:.2f} ms"
    )
    print(f"  event loop thread CPU: {(last[1] - cpu0) / wall * 100:.0f}% of one core")


if __name__ == "__main__":
    main()
