"""glibc's heap, tuned for a long-running process's resident memory (no-ops elsewhere)."""

from __future__ import annotations

import ctypes
import functools
from typing import Any

M_ARENA_MAX = -8  # mallopt() parameter, from glibc's malloc.h


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
    arena of its own, whose freed pages malloc_trim hardly returns: the warm-up's loaders
    left ~7 MB resident that way. The GIL serialises most allocations anyway."""
    libc = _libc()
    if libc is not None:
        libc.mallopt(M_ARENA_MAX, 1)


def trim() -> None:
    """Hands memory freed since start-up back to the system. glibc keeps freed heap (the
    imports', the loaders' temporary buffers) mapped; malloc_trim returns the free pages."""
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)
