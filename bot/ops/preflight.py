"""Checks that need the file system, run before anything is opened: a bad setting found
here is one line and exit status 2; later, it would leave a half-built app (an undisposed
engine's worker thread keeps the process alive)."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from tools.errors import ConfigError
from tools.mcp.config import load_config

if TYPE_CHECKING:
    from bot.config import Settings


def writable(folder: Path, name: str) -> str | None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as exc:
        return f"{name}: cannot write to {folder} ({exc.strerror or exc})"
    return None


def preflight(settings: Settings) -> list[str]:
    """Every problem found, one per line. What the bot creates from here on is for its own
    account only: other local accounts must not read the users' data."""
    os.umask(0o077)
    out: list[str] = []
    database = sqlite_file(settings) if settings.database_url else None
    if database is not None:
        out.append(writable(database.parent, "DATABASE_URL") or "")
    out.append(writable(settings.data_dir, "DATA_DIR") or "")
    try:
        load_config(settings.mcp_config)
    except ConfigError as exc:
        out.append(str(exc))
    return [p for p in out if p]


# Commands that make their database by design (migrate and restore always, run and chat on
# first start, saying so), or need none (service).
CREATES_DATABASE = frozenset({"migrate", "restore", "run", "chat", "service"})


def sqlite_file(settings: Settings) -> Path | None:
    from sqlalchemy.engine import make_url  # the database layer: not for a bad setting's exit

    url = make_url(settings.db_url)
    if not url.drivername.startswith("sqlite") or url.database in (None, "", ":memory:"):
        return None
    return Path(url.database).resolve()


def where_am_i(env_file: Path | None, command: str, settings: Settings) -> None:
    """Outside the project folder (no .env found): say which .env and database are used, and
    refuse to make a new empty database by accident (`sidekick usage` would report on it)."""
    from bot.config import env_path

    # The terminal chat talks to the person on stdout (its stderr is for failures only).
    out = sys.stdout if command == "chat" else sys.stderr
    env = env_path(env_file)
    database = sqlite_file(settings)
    new = database is not None and not database.exists()
    if not env.is_file():
        print(
            f"sidekick: no {env.resolve()}: settings from the environment only; "
            f"database {database or 'from DATABASE_URL'}",
            file=out,
        )
        if new and command not in CREATES_DATABASE:
            raise ConfigError(
                f"no database at {database}: run this in the folder that holds your .env, "
                "or set SIDEKICK_HOME / --env-file (`sidekick migrate` creates a new one)"
            )
    if new and command in ("run", "chat"):
        print(f"sidekick: first start: creating a new database at {database}", file=out)


def tighten(settings: Settings) -> None:
    """A SQLite database (and its WAL and SHM) made before the umask rule: owner only."""
    database = sqlite_file(settings)
    if database is None:
        return
    for path in (database, f"{database}-wal", f"{database}-shm"):
        try:
            if os.stat(path).st_mode & 0o077:
                os.chmod(path, 0o600)
        except OSError:
            continue  # not there (yet): created under the umask
