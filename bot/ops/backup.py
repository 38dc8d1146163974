"""`sidekick backup`: the database and the data folder's own files in one verified .tar.gz.

SQLite is copied with its online backup API, under the database's own locks, so a running
bot keeps writing meanwhile; PostgreSQL through `pg_dump`. `backup.json` says what is inside."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import shutil
import sqlite3
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path, PurePosixPath
from typing import IO, TYPE_CHECKING

from sqlalchemy.engine import make_url

from bot.config import Settings
from bot.errors import SidekickError
from bot.ops.preflight import sqlite_file
from bot.ops.runlock import LOCK_FILE
from tools.base import CheckResult

if TYPE_CHECKING:
    from scheduler.setup import JobSpec

log = logging.getLogger(__name__)

MANIFEST = "backup.json"
SQLITE_NAME = "sidekick.db"
PG_NAME = "sidekick.pgdump"
PREFIX = "sidekick-"
SUFFIX = ".tar.gz"
# Not user files: the database is copied through its API, journals and logs are not data,
# and a backup must not hold the earlier backups.
SKIP_SUFFIXES = ("-wal", "-shm", "-journal", ".log")


class BackupError(SidekickError):
    """A backup or restore that could not be made or did not verify."""


@dataclass(frozen=True)
class Verified:
    path: Path
    tables: dict[str, int]
    files: int


def archive_path(settings: Settings, target: Path | None, now: datetime) -> Path:
    name = f"{PREFIX}{now.strftime('%Y%m%d-%H%M%S')}{SUFFIX}"
    if target is None:
        return settings.data_dir / "backups" / name
    if target.is_dir() or not target.name.endswith(SUFFIX):
        return target / name
    return target


def read_only(db: Path) -> contextlib.closing[sqlite3.Connection]:
    # Closed when the `with` ends: sqlite3's own context manager only ends a transaction.
    return contextlib.closing(sqlite3.connect(f"file:{db}?mode=ro", uri=True))


def table_counts(db: Path) -> dict[str, int]:
    """Rows per ordinary table; raises BackupError unless the integrity check says ok."""
    try:
        with read_only(db) as conn:
            check = conn.execute("PRAGMA integrity_check").fetchall()
            if check != [("ok",)]:
                raise BackupError(f"{db.name}: integrity check failed: {check[:3]}")
            # Virtual tables (sqlite-vec) need their extension to be read; their rows live in
            # ordinary shadow tables, which are counted.
            names = [
                row[0]
                for row in conn.execute(
                    "SELECT name FROM sqlite_master WHERE type = 'table' "
                    "AND sql NOT LIKE 'CREATE VIRTUAL TABLE%' ORDER BY name"
                )
            ]
            return {
                n: conn.execute(f"SELECT count(*) FROM {quoted(n)}").fetchone()[0] for n in names
            }
    except sqlite3.DatabaseError as exc:  # not a database, or damaged past reading
        raise BackupError(f"{db.name} is not a readable SQLite database ({exc})") from None


def quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def libpq_url(url: str) -> str:
    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def pg_tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise BackupError(f"{name} not found: install the PostgreSQL client (postgresql-client)")
    return found


def user_files(data_dir: Path, skip: set[Path]) -> list[Path]:
    out = []
    for path in sorted(data_dir.rglob("*")):
        rel = path.relative_to(data_dir)
        if path.is_dir() or rel.parts[0] in ("backups", LOCK_FILE) or path.resolve() in skip:
            continue
        if path.name.endswith(SKIP_SUFFIXES) or ".log." in path.name:
            continue
        out.append(path)
    return out


def make_backup(
    settings: Settings, target: Path | None = None, now: datetime | None = None
) -> Path:
    now = now or datetime.now(UTC)
    out = archive_path(settings, target, now)
    out.parent.mkdir(parents=True, exist_ok=True)
    database = sqlite_file(settings)
    manifest: dict[str, object] = {"created": now.isoformat(), "format": 1}
    with tempfile.TemporaryDirectory(prefix="sidekick-backup-") as tmp:
        staged = Path(tmp)
        if database is not None:
            if not database.exists():
                raise BackupError(f"no database at {database}")
            copy = staged / SQLITE_NAME
            # The online backup API: consistent even while the bot writes (WAL or not).
            with read_only(database) as src, contextlib.closing(sqlite3.connect(copy)) as dst:
                src.backup(dst)
            manifest |= {"database": "sqlite", "tables": table_counts(copy)}
        else:
            dump = [pg_tool("pg_dump"), "--format=custom", "--no-owner"]
            run_tool([*dump, f"--file={staged / PG_NAME}", libpq_url(settings.db_url)])
            manifest |= {"database": "postgresql", "tables": {}}
        skip = {p.resolve() for p in (database, out) if p is not None}
        files = user_files(settings.data_dir, skip)
        manifest["files"] = [str(p.relative_to(settings.data_dir)) for p in files]
        (staged / MANIFEST).write_text(json.dumps(manifest, indent=1))
        partial = out.with_name(out.name + ".partial")
        with tarfile.open(partial, "w:gz") as tar:
            tar.add(staged / MANIFEST, MANIFEST)
            for name in (SQLITE_NAME, PG_NAME):
                if (staged / name).exists():
                    tar.add(staged / name, name)
            for path in files:
                tar.add(path, f"data/{path.relative_to(settings.data_dir)}")
        partial.chmod(0o600)  # it holds every conversation
        partial.replace(out)  # a crash leaves a .partial, never a half archive by the real name
    return out


def run_tool(argv: list[str]) -> None:
    proc = subprocess.run(argv, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        # The URL may hold the password: name the tool, not its arguments.
        raise BackupError(f"{Path(argv[0]).name} failed: {proc.stderr.strip()[-500:]}")


# Every member of an archive this version restores: a member past this is refused before
# anything is extracted (a backup's files are a chat's photos and documents, and the database).
MAX_FILE_BYTES = 1 << 30
MAX_DATABASE_BYTES = 16 << 30


def _member(tar: tarfile.TarFile, name: str, missing: str) -> IO[bytes]:
    with contextlib.suppress(KeyError):
        if (member := tar.extractfile(name)) is not None:
            return member
    raise BackupError(missing)


def read_manifest(tar: tarfile.TarFile) -> dict[str, object]:
    member = _member(tar, MANIFEST, f"not a Sidekick backup: no {MANIFEST}")
    try:
        data = json.loads(member.read(1 << 20))
    except ValueError:
        raise BackupError(f"{MANIFEST} is not JSON") from None
    if not isinstance(data, dict) or data.get("format") != 1:
        raise BackupError(f"{MANIFEST} is not a format-1 Sidekick manifest")
    if data.get("database") not in ("sqlite", "postgresql"):
        raise BackupError(f"{MANIFEST}: database is neither sqlite nor postgresql")
    files, tables = data.get("files", []), data.get("tables", {})
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        raise BackupError(f"{MANIFEST}: files is not a list of names")
    if not isinstance(tables, dict) or not all(
        isinstance(k, str) and isinstance(v, int) for k, v in tables.items()
    ):
        raise BackupError(f"{MANIFEST}: tables is not a map of row counts")
    for name in files:
        path = PurePosixPath(name)
        if not name or path.is_absolute() or ".." in path.parts:
            raise BackupError(f"{MANIFEST}: refusing the path {name[:200]!r}")
    return data


def check_members(tar: tarfile.TarFile) -> int:
    """The bytes the archive would extract, refusing links, devices, paths outside, names a
    backup does not write and members over their cap. Read member by member, so an oversized
    one is refused without decompressing past it."""
    total = 0
    for m in tar:
        name = m.name[:200]
        path = PurePosixPath(m.name)
        if path.is_absolute() or ".." in path.parts:
            raise BackupError(f"refusing the path {name!r}")
        if not (m.isfile() or m.isdir()):
            raise BackupError(f"{name} is a link or a device, not a file: refused")
        if m.isdir():
            continue
        if m.name in (SQLITE_NAME, PG_NAME):
            cap = MAX_DATABASE_BYTES
        elif m.name == MANIFEST or path.parts[0] == "data":
            cap = MAX_FILE_BYTES
        else:
            raise BackupError(f"{name} is not part of a Sidekick backup: refused")
        if m.size > cap:
            raise BackupError(f"{name} is {m.size / 2**30:.1f} GiB, over the {cap >> 30} GiB cap")
        total += m.size
    return total


def verify(archive: Path) -> Verified:
    """The archive's database passes its integrity check and holds the row counts and files
    its manifest says; every failure is one line (BackupError)."""
    try:
        with tarfile.open(archive, "r:gz") as tar, tempfile.TemporaryDirectory() as tmp:
            check_members(tar)
            manifest = read_manifest(tar)
            names = set(tar.getnames())
            files = [str(f) for f in manifest.get("files", [])]  # type: ignore[attr-defined]
            absent = [f for f in files if f"data/{f}" not in names]
            if absent:
                raise BackupError(f"files missing from the archive: {absent[:3]}")
            if manifest.get("database") == "sqlite":
                counts = table_counts(extract_one(tar, SQLITE_NAME, Path(tmp)))
                if counts != manifest.get("tables"):
                    raise BackupError("row counts differ from the manifest")
            else:
                dump = extract_one(tar, PG_NAME, Path(tmp))
                run_tool([pg_tool("pg_restore"), "--list", str(dump)])
                counts = {}
    except BackupError as exc:
        raise BackupError(f"{archive}: {exc}") from None
    except (tarfile.TarError, OSError, EOFError, KeyError, ValueError) as exc:
        raise BackupError(f"{archive}: cannot read it: {type(exc).__name__}: {exc}") from None
    return Verified(archive, counts, len(files))


def extract_one(tar: tarfile.TarFile, name: str, folder: Path) -> Path:
    # By its bytes: no paths or links from the archive are followed (tarfile's extraction
    # filters are missing from some 3.11 builds).
    member = _member(tar, name, f"{name} in the archive is not a file")
    out = folder / Path(name).name
    with out.open("wb") as f:
        shutil.copyfileobj(member, f)
    return out


def archives(settings: Settings) -> list[Path]:
    # Oldest first: their names sort by time.
    folder = settings.data_dir / "backups"
    return sorted(folder.glob(f"{PREFIX}*{SUFFIX}")) if folder.is_dir() else []


def daily_backup(settings: Settings, now: datetime | None = None) -> Path | None:
    """One verified backup a day, keeping the newest BACKUP_KEEP. Asked hourly, it derives
    from the newest archive whether one is due, so a bot restarted every hour still backs up
    once a day, and a missed day is caught up."""
    if settings.backup_keep <= 0:
        return None
    now = now or datetime.now(UTC)
    existing = archives(settings)
    if existing and now - modified(existing[-1]) < timedelta(hours=23):
        return None
    made = make_backup(settings, now=now)
    verify(made)
    for old in archives(settings)[: -settings.backup_keep]:
        old.unlink()
    log.info("daily backup %s (keeping %d)", made, settings.backup_keep)
    return made


def modified(path: Path) -> datetime:
    stamp = path.name.removeprefix(PREFIX).removesuffix(SUFFIX)
    try:
        return datetime.strptime(stamp, "%Y%m%d-%H%M%S").replace(tzinfo=UTC)
    except ValueError:
        return datetime.fromtimestamp(path.stat().st_mtime, UTC)


def backup_jobs(settings: Settings) -> list[JobSpec]:
    if settings.backup_keep <= 0:
        return []

    async def daily() -> None:
        await asyncio.to_thread(daily_backup, settings)

    return [("daily-backup", "one verified backup a day (BACKUP_KEEP)", timedelta(hours=1), daily)]


def backup_status(settings: Settings, now: datetime | None = None) -> CheckResult:
    if settings.backup_keep <= 0:
        return CheckResult(
            "backup", True, "daily backups off (BACKUP_KEEP=0); `sidekick backup` makes one"
        )
    existing = archives(settings)
    if not existing:
        return CheckResult("backup", True, f"daily, keeping {settings.backup_keep}; none made yet")
    age = (now or datetime.now(UTC)) - modified(existing[-1])
    detail = f"daily, keeping {settings.backup_keep}; newest {existing[-1]} ({age.days} day(s) old)"
    if age > timedelta(days=2):
        return CheckResult("backup", False, detail, "is the bot running? see DATA_DIR/sidekick.log")
    return CheckResult("backup", True, detail)
