"""`sidekick doctor --fix`, before the checks run: what needs no person's decision (.env 600,
the data folder 700, missing folders, pending migrations, bubblewrap with apt-get as root)."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

from bot.config import Settings
from tools.base import CheckResult

APT_LINE = "sudo apt-get install bubblewrap"
APT_TIMEOUT_S = 600


def _mode(path: Path, wanted: int, what: str) -> CheckResult | None:
    path = path.resolve()
    current = stat.S_IMODE(path.stat().st_mode)
    if current & ~wanted == 0:
        return None
    try:
        path.chmod(wanted)
    except OSError as exc:
        return CheckResult(what, False, f"{path} is {current:o}; chmod failed: {exc}",
                           f"chmod {wanted:o} {path}")  # fmt: skip
    return CheckResult(what, True, f"fixed: {path} was {current:o}, now {wanted:o}")


def fix_files(settings: Settings) -> list[CheckResult]:
    out: list[CheckResult] = []
    env = settings.env_source
    if env is not None and env.is_file():
        out += [r for r in [_mode(env, 0o600, ".env mode")] if r]
    folders = [settings.data_dir]
    if settings.backup_keep:
        folders.append(settings.data_dir / "backups")
    for folder in folders:
        if not folder.is_dir():
            folder.mkdir(parents=True, mode=0o700)
            out.append(CheckResult("folder", True, f"fixed: made {folder.resolve()} (mode 700)"))
    out += [r for r in [_mode(settings.data_dir, 0o700, "data folder mode")] if r]  # made above
    return out


async def fix_migrations(settings: Settings) -> list[CheckResult]:
    from db.engine import create_engine
    from db.migrate import pending, upgrade

    engine = create_engine(settings.db_url)
    todo: list[str] = []
    try:
        todo = sorted(await pending(engine))
        if not todo:
            return []
        await upgrade(engine)
    except Exception as exc:
        detail = f"could not apply {', '.join(todo) or 'them'}: {type(exc).__name__}: {exc}"
        return [CheckResult("migrations", False, detail, "run `sidekick migrate`")]
    finally:
        await engine.dispose()
    return [CheckResult("migrations", True, f"fixed: applied {len(todo)} ({', '.join(todo)})")]


def fix_bubblewrap(root: bool) -> list[CheckResult]:
    if not sys.platform.startswith("linux") or shutil.which("bwrap"):
        return []
    if not root or not shutil.which("apt-get"):
        return [CheckResult("bubblewrap", False, "not installed (the code tool's best sandbox)",
                            f"{APT_LINE} (needs root: not done)")]  # fmt: skip
    print("sidekick: installing bubblewrap with apt-get (as root)...", file=sys.stderr)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for argv in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "bubblewrap"]):
        done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=APT_TIMEOUT_S)
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            return [CheckResult("bubblewrap", False, f"{' '.join(argv)} failed: {tail[0]}",
                                APT_LINE)]  # fmt: skip
    found = shutil.which("bwrap")
    return [CheckResult("bubblewrap", bool(found), f"fixed: installed ({found})" if found
                        else "apt-get ran but bwrap is not on PATH", APT_LINE)]  # fmt: skip


async def apply_fixes(settings: Settings, root: bool | None = None) -> list[CheckResult]:
    root = os.geteuid() == 0 if root is None else root
    return [*fix_files(settings), *await fix_migrations(settings), *fix_bubblewrap(root)]
