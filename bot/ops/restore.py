"""`sidekick restore PATH`: an archive from `sidekick backup` back into DATA_DIR and the
database; a target holding data needs `--force` (restoring over a live install by accident
would lose everything since). Everything is checked (members, manifest, free space, the
database's integrity, stamp and schema) and extracted beside the target before anything in
it changes; then renames swap it in, undone if one fails. Every refusal is one line."""

from __future__ import annotations

import asyncio
import os
import shutil
import sqlite3
import tarfile
import tempfile
from datetime import UTC, datetime
from pathlib import Path, PurePosixPath

from bot.config import Settings
from bot.ops.backup import (
    PG_NAME,
    SQLITE_NAME,
    BackupError,
    Verified,
    check_members,
    extract_one,
    libpq_url,
    pg_tool,
    read_manifest,
    read_only,
    run_tool,
    verify,
)
from bot.ops.preflight import sqlite_file
from bot.ops.runlock import LOCK_FILE, Busy, hold

# Left alone in DATA_DIR: a restore does not count them as data, nor does it touch them.
KEPT = frozenset({"backups", LOCK_FILE})
STAGING = ".restore-"
JOURNALS = ("-wal", "-shm", "-journal")
PG_RESTORE = ("--clean", "--if-exists", "--no-owner", "--single-transaction")


def kept(path: Path) -> bool:
    name = path.name
    return name in KEPT or name.startswith(STAGING) or name.endswith(".log") or ".log." in name


def _replaced(data_dir: Path, database: Path | None) -> list[Path]:
    # The database and its journals move apart.
    if not data_dir.is_dir():
        return []
    journals = {database.name + s for s in JOURNALS} if database is not None else set()
    return [
        p
        for p in sorted(data_dir.iterdir())
        if not kept(p) and p.resolve() != database and p.name not in journals
    ]


def restore(settings: Settings, archive: Path, force: bool = False) -> Verified:
    # Holding the data folder (bot/ops/runlock.py): a running bot would go on writing to the
    # file it has open, the replaced one.
    checked = verify(archive)
    try:
        with hold(settings.data_dir, datetime.now(UTC), "restore"):
            return _restore(settings, archive, checked, force)
    except Busy as exc:
        raise BackupError(f"{exc}; nothing was restored") from None


def _restore(settings: Settings, archive: Path, checked: Verified, force: bool) -> Verified:
    database = sqlite_file(settings)
    in_the_way = [str(database)] if database is not None and database.exists() else []
    in_the_way += [str(p) for p in _replaced(settings.data_dir, database)]
    if in_the_way and not force:
        raise BackupError(
            f"{settings.data_dir} already holds data ({', '.join(in_the_way[:3])}); stop the "
            "bot and pass --force to replace it with the backup"
        )
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    # Beside the target (the same file system: the swap is renames, never copies).
    staging = Path(tempfile.mkdtemp(prefix=STAGING, dir=settings.data_dir))
    try:
        with tarfile.open(archive, "r:gz") as tar:
            staged_db = _stage(settings, archive, tar, database, staging)
        if database is None:
            url, dump = libpq_url(settings.db_url), str(staging / PG_NAME)
            run_tool([pg_tool("pg_restore"), *PG_RESTORE, f"--dbname={url}", dump])
        _swap(settings.data_dir, staging / "new", database, staged_db)
    except (tarfile.TarError, EOFError, KeyError) as exc:
        raise BackupError(f"{archive}: cannot read it: {type(exc).__name__}") from None
    except OSError as exc:
        raise BackupError(f"restoring {archive} failed, the target is as it was: {exc}") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return checked


def _stage(
    settings: Settings,
    archive: Path,
    tar: tarfile.TarFile,
    database: Path | None,
    staging: Path,
) -> Path | None:
    size = check_members(tar)
    manifest = read_manifest(tar)
    if (manifest.get("database") == "sqlite") != (database is not None):
        kind = "SQLite" if database is not None else "PostgreSQL"
        raise BackupError(
            f"{archive} holds a {manifest.get('database')} database but DATABASE_URL is "
            f"{kind}: `sidekick migrate --from/--to` copies between the two"
        )
    free = shutil.disk_usage(staging).free
    if size > free:
        raise BackupError(
            f"{archive} needs {size / 2**20:.0f} MiB and {settings.data_dir} has "
            f"{free / 2**20:.0f} MiB free"
        )
    new = staging / "new"
    new.mkdir()
    for name in manifest.get("files", []):  # type: ignore[attr-defined]
        rel = PurePosixPath(str(name))
        target = new / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(extract_one(tar, f"data/{rel}", staging), target)
    if database is None:
        extract_one(tar, PG_NAME, staging)
        return None
    staged = extract_one(tar, SQLITE_NAME, staging)
    check_database(staged, staging)
    return staged


def _swap(data_dir: Path, new: Path, database: Path | None, staged_db: Path | None) -> None:
    aside = new.parent / "old"
    aside.mkdir()
    moved: list[tuple[Path, Path]] = []

    def move(src: Path, dst: Path) -> None:
        dst.parent.mkdir(parents=True, exist_ok=True)
        os.rename(src, dst)
        moved.append((src, dst))

    try:
        if database is not None and staged_db is not None:
            # A journal left by the replaced database would be replayed into the restored one.
            for path in [database, *(database.with_name(database.name + s) for s in JOURNALS)]:
                if path.exists():
                    move(path, aside / "database" / path.name)
        for entry in _replaced(data_dir, database):
            move(entry, aside / entry.name)
        for entry in sorted(new.iterdir()):
            move(entry, data_dir / entry.name)
        if database is not None and staged_db is not None:
            database.parent.mkdir(parents=True, exist_ok=True)
            move(staged_db, database)
    except OSError:
        for src, dst in reversed(moved):
            if dst.exists() or dst.is_symlink():
                os.rename(dst, src)
        raise


def check_database(db: Path, scratch: Path) -> None:
    """BackupError unless our migrations made `db` (a stamp we know, nothing beside what they
    make) and, brought to head, it is what the models declare. Leaves `db` at head."""
    revision = _stamp(db)
    reference = scratch / "reference.db"
    asyncio.run(_migrate_to(reference, revision))
    extra = sorted(_objects(db) - _objects(reference))
    if extra:
        shown = ", ".join(f"{kind} {name[:60]!r}" for kind, name in extra[:5])
        raise BackupError(f"the database holds what its schema does not have: {shown}")
    asyncio.run(_migrate_to(db))
    problems = asyncio.run(_differences(db))
    if problems:
        raise BackupError(f"the database does not match the models: {'; '.join(problems[:5])}")


def _stamp(db: Path) -> str:
    from alembic.script import ScriptDirectory
    from alembic.util import CommandError

    from db.migrate import alembic_config

    try:
        with read_only(db) as conn:
            rows = conn.execute("SELECT version_num FROM alembic_version").fetchall()
    except sqlite3.DatabaseError:
        raise BackupError("the database has no migration stamp (empty, or not ours)") from None
    if len(rows) != 1:
        raise BackupError(f"the database's migration stamp holds {len(rows)} revisions, not one")
    revision = str(rows[0][0])
    try:
        found = ScriptDirectory.from_config(alembic_config()).get_revision(revision)
    except CommandError:
        found = None
    if found is None:
        raise BackupError(f"the database is at revision {revision[:40]!r}, unknown to this version")
    return revision


def _objects(db: Path) -> set[tuple[str, str]]:
    with read_only(db) as conn:
        return {(str(t), str(n)) for t, n in conn.execute("SELECT type, name FROM sqlite_master")}


async def _migrate_to(db: Path, revision: str = "head") -> None:
    from db.engine import create_engine
    from db.migrate import upgrade

    engine = create_engine(f"sqlite+aiosqlite:///{db}")
    try:
        await upgrade(engine, revision)
    finally:
        await engine.dispose()


async def _differences(db: Path) -> list[str]:
    from bot.features import metadata
    from db.engine import create_engine
    from db.migrate import differences

    engine = create_engine(f"sqlite+aiosqlite:///{db}")
    try:
        async with engine.connect() as conn:
            return await conn.run_sync(differences, metadata())
    finally:
        await engine.dispose()
