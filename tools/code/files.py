"""Files in and out of a code run: fresh copies of the user's uploads (DATA_DIR/inputs/<user
key>/) as ./input/, so code never changes the originals; ./output/ read back before the work
dir goes, regular files only (no links) within count and size limits, so a run cannot make
the bot read or send anything else.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from tools.base import RequestContext
from tools.code.tree import walk_files
from tools.hooks import File, TurnHooks
from tools.state import Slot

INPUT_DIR = "input"
OUTPUT_DIR = "output"
MAX_OUTPUT_FILES = 10
MAX_OUTPUT_FILE_BYTES = 20 * 1024 * 1024
MAX_OUTPUT_TOTAL_BYTES = 50 * 1024 * 1024
KEEP_INPUT_FILES = 10  # per user: older uploads are dropped
MAX_INPUT_TOTAL_BYTES = 100 * 1024 * 1024  # per user (copied into every run)
STALE_DOWNLOAD_S = 3600  # a ".dl-" file this old is left from a crash
PRIVATE_DIR = 0o700


@dataclass
class Collected:
    files: list[File] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)  # "name: why"


def safe_name(name: str, default: str = "file") -> str:
    """A file name without directories or odd characters (max 100 chars, extension kept)."""
    base = os.path.basename(name.replace("\\", "/")).strip()
    base = re.sub(r"[^\w.\-]+", "_", base).lstrip(".")
    if not base:
        return default
    stem, dot, ext = base.rpartition(".")
    if dot and len(ext) <= 10 and len(base) > 100:
        return stem[: 99 - len(ext)] + "." + ext
    return base[:100]


def user_key(telegram_user_id: int | None, user_id: int) -> str:
    return f"tg{telegram_user_id}" if telegram_user_id is not None else f"u{user_id}"


@dataclass
class InputStore:
    """The uploads of each user, newest kept, bounded in count and bytes."""

    base: Path

    def dir_for(self, key: str) -> Path:
        return self.base / key

    def scratch(self, key: str) -> Path:
        """A fresh hidden path in the user's folder for a download in progress."""
        folder = self.dir_for(key)
        self._make(folder)
        return folder / f".dl-{uuid.uuid4().hex}"

    def add(self, key: str, name: str, src: Path) -> str:
        """Move `src` in as `name` (sanitised); returns the name used."""
        folder = self.dir_for(key)
        self._make(folder)
        name = safe_name(name)
        os.replace(src, folder / name)
        self._prune(folder)
        return name

    def write(self, key: str, name: str, data: bytes) -> str:
        tmp = self.scratch(key)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        return self.add(key, name, tmp)

    def _make(self, folder: Path) -> None:
        """The uploads folder and the user's folder in it, private (the users' files)."""
        for d in (self.base, folder):
            d.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
            if stat.S_IMODE(d.stat().st_mode) & 0o077:
                os.chmod(d, PRIVATE_DIR)  # made before this rule, or under a loose umask

    def _prune(self, folder: Path) -> None:
        now = time.time()
        for p in folder.glob(".dl-*"):
            with contextlib.suppress(OSError):
                if now - p.stat().st_mtime > STALE_DOWNLOAD_S:
                    p.unlink()
        files = sorted(
            (p for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")),
            key=lambda p: p.stat().st_mtime,
            reverse=True,
        )
        total = 0
        for i, p in enumerate(files):
            total += p.stat().st_size
            if i >= KEEP_INPUT_FILES or total > MAX_INPUT_TOTAL_BYTES:
                with contextlib.suppress(OSError):
                    p.unlink()


def io_dir(workdir: Path) -> Path:
    """Where input/ and output/ live beside a work dir that the sandbox replaces by a
    size-capped tmpfs (bwrap, mount namespaces): they are bound into it at /work/input
    and /work/output, so they outlive the run."""
    return workdir.with_name(workdir.name + ".io")


def private_dir(path: Path) -> None:
    """Create `path` for this process only, refusing one that exists: a folder another
    local account made first (in a shared /tmp) could be read or filled by it."""
    os.mkdir(path, PRIVATE_DIR)
    os.chmod(path, PRIVATE_DIR)  # whatever the umask


def stage(io: Path, inputs: Path | None, uid: int | None) -> None:
    """Create input/ (copies of the user's files) and an empty output/ in `io`, both new
    and private (FileExistsError when either is there already)."""
    made = [io / INPUT_DIR, io / OUTPUT_DIR]
    for d in made:
        private_dir(d)
    if inputs is not None and inputs.is_dir():
        for src in inputs.iterdir():
            if src.is_file() and not src.is_symlink() and not src.name.startswith("."):
                dst = io / INPUT_DIR / src.name
                shutil.copyfile(src, dst)
                made.append(dst)
    if uid is not None:
        for p in made:
            os.chown(p, uid, uid)


def collect(workdir: Path) -> Collected:
    """The regular files under output/ (walked within tree.py's bounds), within the
    limits: in the io dir beside the work dir when the sandbox bound it in, else in the
    work dir itself."""
    out = Collected()
    root = io_dir(workdir) / OUTPUT_DIR
    if not root.exists():
        root = workdir / OUTPUT_DIR
    if not root.is_dir() or root.is_symlink():
        return out
    total = 0
    found = walk_files(str(root))
    for item in found.files:
        rel = item.rel
        try:
            data = read_regular(Path(item.path))
        except ValueError as exc:
            out.skipped.append(f"{rel}: {exc}")
            continue
        if len(out.files) >= MAX_OUTPUT_FILES:
            out.skipped.append(f"{rel}: more than {MAX_OUTPUT_FILES} files")
        elif len(data) > MAX_OUTPUT_FILE_BYTES:  # grew while we read it
            out.skipped.append(f"{rel}: over {MAX_OUTPUT_FILE_BYTES // 2**20} MB")
        elif total + len(data) > MAX_OUTPUT_TOTAL_BYTES:
            out.skipped.append(f"{rel}: over {MAX_OUTPUT_TOTAL_BYTES // 2**20} MB in all")
        else:
            total += len(data)
            out.files.append((safe_name(rel.rpartition("/")[2]), data))
    out.skipped.extend(found.left_out)
    return out


def read_regular(path: Path) -> bytes:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise ValueError("not a regular file") from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
            raise ValueError("not a regular file")
        if st.st_size > MAX_OUTPUT_FILE_BYTES:
            raise ValueError(f"over {MAX_OUTPUT_FILE_BYTES // 2**20} MB")
        with os.fdopen(fd, "rb", closefd=False) as f:
            return f.read(MAX_OUTPUT_FILE_BYTES + 1)
    finally:
        os.close(fd)


# What this request's runs wrote to ./output/, (name, content): sent with the answer.
OUTPUT_FILES: Slot[list[File]] = Slot("code.files", list)


class FilesOut(TurnHooks):
    """The code feature's part of a request that ran code: its runs' files go with the answer."""

    when = (OUTPUT_FILES,)

    def files(self, ctx: RequestContext) -> list[File]:
        return ctx.state(OUTPUT_FILES)
