"""Walking and removing what a run left on the host's disk, without recursion: model code
decides the tree's shape, and one thousands of folders deep makes os.walk and shutil.rmtree
raise RecursionError and its paths pass PATH_MAX. The walk is bounded; the removal works
from directory descriptors, moving a deep folder's children up.
"""

from __future__ import annotations

import contextlib
import errno
import itertools
import logging
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass

log = logging.getLogger(__name__)

MAX_DEPTH = 16  # folders below output/ that are looked into
MAX_ENTRIES = 5000  # entries looked at in all
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


@dataclass(frozen=True)
class Found:
    rel: str  # path below the top, "/"-separated
    path: str  # full path to open


@dataclass
class Walk:
    """Files found under a top folder in sorted, depth-first order, and what was left out."""

    files: list[Found]
    left_out: list[str]


def walk_files(top: str, max_depth: int = MAX_DEPTH, max_entries: int = MAX_ENTRIES) -> Walk:
    """Non-directory entries under `top` (symlinks included, never followed), files of a
    folder before its subfolders, like os.walk; stops at `max_depth` and `max_entries`."""
    out = Walk([], [])
    seen = 0
    stack: list[tuple[str, int]] = [("", 0)]
    while stack:
        rel, depth = stack.pop()
        try:
            with os.scandir(os.path.join(top, rel) if rel else top) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            out.left_out.append(f"{rel or '.'}: not readable ({exc.strerror or exc})")
            continue
        subdirs: list[str] = []
        for entry in entries:
            seen += 1
            if seen > max_entries:
                out.left_out.append(f"more than {max_entries} entries; the rest was not read")
                return out
            name = f"{rel}/{entry.name}" if rel else entry.name
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if not is_dir:
                out.files.append(Found(name, entry.path))
            elif depth + 1 > max_depth:
                out.left_out.append(f"{name}: deeper than {max_depth} folders; not read")
            else:
                subdirs.append(name)
        stack.extend((d, depth + 1) for d in reversed(subdirs))
    return out


def remove_tree(top: str | os.PathLike[str]) -> bool:
    """Remove `top` and everything under it, however deep; False (and a log line) when
    something could not be removed. Never raises."""
    try:
        root = os.open(top, _DIR_FLAGS)
    except FileNotFoundError:
        return True
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(top)  # a symlink or a file: remove the entry itself
            return True
        log.warning("could not open %s to remove it", top)
        return False
    try:
        ok = _empty(root)
    finally:
        os.close(root)
    try:
        os.rmdir(top)
    except OSError as exc:
        log.warning("could not remove %s: %s", top, exc)
        return False
    return ok


def _empty(root: int) -> bool:
    """Empty the folder open as `root`: files go, and each non-empty subfolder has its
    children renamed up into `root` before it goes, until nothing is left."""
    names = itertools.count()
    while True:
        progress = False
        with os.scandir(root) as it:
            batch = list(itertools.islice(it, 1000))
        if not batch:
            return True
        for entry in batch:
            progress |= _remove_entry(root, entry, names)
        if not progress:
            log.warning("could not remove %s entries of a run's folder", len(batch))
            return False


def _remove_entry(root: int, entry: os.DirEntry[str], names: Iterator[int]) -> bool:
    try:
        if not entry.is_dir(follow_symlinks=False):
            os.unlink(entry.name, dir_fd=root)
            return True
        with contextlib.suppress(OSError):
            os.rmdir(entry.name, dir_fd=root)
            return True
        # The code may have taken our rights away (same uid when we are not root).
        with contextlib.suppress(OSError):
            os.chmod(entry.name, stat.S_IRWXU, dir_fd=root)
        child = os.open(entry.name, _DIR_FLAGS, dir_fd=root)
        try:
            with os.scandir(child) as it:
                moved = [
                    _move_up(child, sub.name, root, names) for sub in itertools.islice(it, 1000)
                ]
        finally:
            os.close(child)
        return any(moved)
    except OSError:
        return False


def _move_up(child: int, name: str, root: int, names: Iterator[int]) -> bool:
    for _ in range(5):  # a fresh name clashing with a moved entry: try the next one
        try:
            os.rename(name, f".rm{next(names)}", src_dir_fd=child, dst_dir_fd=root)
            return True
        except OSError as exc:
            if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY, errno.EISDIR, errno.ENOTDIR):
                return False
    return False
