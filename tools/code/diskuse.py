"""How much a run has written under a directory, counting no further than a cap.

Used by the runner (output/, which is on the host's disk) and by confine.py's watcher (a
work dir without a tmpfs to cap it). `os` only: confine.py imports it under `python -I -S`.
"""

from __future__ import annotations

import os

NO_LIMIT = 1 << 62


def usage(
    top: str | os.PathLike[str], max_bytes: int, max_entries: int = NO_LIMIT
) -> tuple[int, int]:
    """Disk bytes and entries under `top` (links not followed); stops past either cap."""
    size = count = 0
    stack: list[str | os.PathLike[str]] = [top]
    while stack:
        try:
            with os.scandir(stack.pop()) as it:
                for entry in it:
                    count += 1
                    try:
                        size += entry.stat(follow_symlinks=False).st_blocks * 512
                        if entry.is_dir(follow_symlinks=False):
                            stack.append(entry.path)
                    except OSError:  # removed meanwhile
                        continue
                    if size > max_bytes or count > max_entries:
                        return size, count
        except OSError:  # removed meanwhile, or not readable: nothing to count
            continue
    return size, count
