"""`sidekick restore PATH`: an archive from `sidekick backup` back into DATA_DIR and the
database. It verifies the archive first and refuses a target that holds data unless told
(`--force`): restoring over a live install by accident would lose everything since."""

from __future__ import annotations

import shutil
import tarfile
import tempfile
from pathlib import Path, PurePosixPath

from bot.backup import (
    PG_NAME,
    SQLITE_NAME,
    BackupError,
    Verified,
    extract_one,
    libpq_url,
    pg_tool,
    read_manifest,
    run_tool,
    verify,
)
from bot.config import Settings
from bot.preflight import sqlite_file

# Left alone in DATA_DIR: a restore does not count them as data, nor does it touch them.
KEPT = frozenset({"backups"})


def occupied(settings: Settings) -> list[str]:
    """What in the target would be overwritten: the database, and files in DATA_DIR."""
    found = []
    database = sqlite_file(settings)
    if database is not None and database.exists():
        found.append(str(database))
    if settings.data_dir.is_dir():
        found += [
            str(p)
            for p in sorted(settings.data_dir.iterdir())
            if p.name not in KEPT and p.resolve() != database and not p.name.endswith(".log")
        ]
    return found


def restore(settings: Settings, archive: Path, force: bool = False) -> Verified:
    checked = verify(archive)
    in_the_way = occupied(settings)
    if in_the_way and not force:
        raise BackupError(
            f"{settings.data_dir} already holds data ({', '.join(in_the_way[:3])}); stop the "
            "bot and pass --force to replace it with the backup"
        )
    database = sqlite_file(settings)
    with tarfile.open(archive, "r:gz") as tar, tempfile.TemporaryDirectory() as tmp:
        manifest = read_manifest(tar)
        if (manifest.get("database") == "sqlite") != (database is not None):
            kind = "SQLite" if database is not None else "PostgreSQL"
            raise BackupError(
                f"{archive} holds a {manifest.get('database')} database but DATABASE_URL is "
                f"{kind}: `sidekick migrate --from/--to` copies between the two"
            )
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        for name in manifest.get("files", []):  # type: ignore[attr-defined]
            rel = PurePosixPath(str(name))
            if rel.is_absolute() or ".." in rel.parts:
                raise BackupError(f"{archive}: refusing the path {name}")
            staged = extract_one(tar, f"data/{rel}", Path(tmp))
            target = settings.data_dir / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(staged, target)
        if database is not None:
            staged = extract_one(tar, SQLITE_NAME, Path(tmp))
            database.parent.mkdir(parents=True, exist_ok=True)
            # A journal left by the replaced database would be replayed into the restored one.
            for suffix in ("-wal", "-shm", "-journal"):
                database.with_name(database.name + suffix).unlink(missing_ok=True)
            shutil.move(staged, database)
        else:
            dump = extract_one(tar, PG_NAME, Path(tmp))
            restore_pg = [pg_tool("pg_restore"), "--clean", "--if-exists", "--no-owner"]
            run_tool([*restore_pg, f"--dbname={libpq_url(settings.db_url)}", str(dump)])
    return checked
