"""The heap of a long-running process: glibc's, tuned for resident memory (no-ops
elsewhere), and the cyclic garbage collector's, kept off the per-message path."""

from __future__ import annotations

import ctypes
import functools
import gc
from typing import Any

M_ARENA_MAX = -8  # mallopt() parameter, from glibc's malloc.h
# Net container allocations between two young collections. CPython's default (700) is
# passed more than once by one message's own allocations, and each young collection walks
# all that its young objects hold (a page of history rows, a request's dicts), every tenth
# the middle generation too. Collected less often, the same garbage costs fewer walks, for
# a pause now and then that a chat does not notice.
YOUNG_THRESHOLD = 10_000


@functools.cache
def _libc() -> Any:
    try:
        libc = ctypes.CDLL("libc.so.6")
        return libc if hasattr(libc, "malloc_trim") and hasattr(libc, "mallopt") else None
    except OSError:  # not glibc (musl, macOS): their allocators need none of this
        return None


def one_arena() -> None:
    """One malloc arena for every thread, set before any thread starts. glibc gives each
    thread that allocates (aiosqlite's connection threads, asyncio.to_thread's workers) an
    arena of its own, whose freed pages malloc_trim hardly returns. The GIL serialises
    most allocations anyway."""
    libc = _libc()
    if libc is not None:
        libc.mallopt(M_ARENA_MAX, 1)


def trim() -> None:
    """Hands memory freed since start-up back to the system. glibc keeps freed heap (the
    imports', the loaders' temporary buffers) mapped; malloc_trim returns the free pages."""
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)


def freeze() -> None:
    """Moves what start-up built out of the collector's reach (every full collection would
    walk it again), then collects the young generation every YOUNG_THRESHOLD allocations.
    Collecting first leaves no garbage frozen. Once per process: one that builds App after
    App (the tests) would otherwise collect its whole heap at every build."""
    if gc.get_freeze_count():
        return
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)
