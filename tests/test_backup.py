"""`sidekick backup` / `restore`: a real archive of a real database, verified, restored."""

from __future__ import annotations

import asyncio
import gzip
import os
import sqlite3
import tarfile
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import text

from bot.config import load_settings
from bot.ops.backup import BackupError, daily_backup, make_backup, verify
from bot.ops.cli import operations_results, unit_text
from bot.ops.restore import restore
from bot.ops.runlock import LOCK_FILE
from db.engine import create_engine
from tests.conftest import migrated_copy, pg_only, sqlite_only
from tests.test_config import sidekick


def migrated(home: Path) -> Path:
    """A migrated database (what `sidekick migrate` makes), with rows in it, and a user file
    beside it."""
    db = migrated_copy(home / "data")
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute(
            "INSERT INTO users (id, telegram_id, name, created_at) "
            "VALUES (1, 42, 'a', '2026-01-01')"
        )
    conn.close()
    (home / "data" / "inputs").mkdir()
    (home / "data" / "inputs" / "photo.jpg").write_bytes(b"\xff\xd8 not really")
    (home / "data" / "chat.log").write_text("a log line\n")
    return db


def rows(db: Path, table: str) -> int:
    conn = sqlite3.connect(db)
    try:
        return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
    finally:
        conn.close()


@pytest.mark.db
def test_backup_verify_restore_round_trip(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".env").write_text("LLM_MODEL=m\n")
    migrated(home)
    proc = sidekick(home, "bot.cli", "backup", str(tmp_path), "--verify")
    assert proc.returncode == 0, proc.stderr
    assert "verified: integrity ok" in proc.stdout and "1 file(s)" in proc.stdout
    archive = next(tmp_path.glob("sidekick-*.tar.gz"))
    with tarfile.open(archive) as tar:
        names = tar.getnames()
    assert "data/inputs/photo.jpg" in names and "data/chat.log" not in names

    other = tmp_path / "other"
    other.mkdir()
    (other / ".env").write_text("LLM_MODEL=m\n")
    proc = sidekick(other, "bot.cli", "restore", str(archive))
    assert proc.returncode == 0, proc.stderr
    assert rows(other / "data" / "sidekick.db", "users") == 1
    assert (other / "data" / "inputs" / "photo.jpg").read_bytes() == b"\xff\xd8 not really"
    # Now the target holds data: a second restore needs --force. (Called here, not through
    # two more processes: how the CLI says a refused restore, and its --force, are
    # test_the_cli_says_a_refused_restore_in_one_line's and test_run_lock's.)
    # The settings that shell's processes read (a clean environment: the `make test-pg`
    # tier's DATABASE_URL is not theirs).
    monkeypatch.delenv("DATABASE_URL", raising=False)
    settings = load_settings(env_file=other / ".env", data_dir=other / "data")
    with pytest.raises(BackupError, match="pass --force"):
        restore(settings, archive)
    restore(settings, archive, force=True)
    assert rows(other / "data" / "sidekick.db", "users") == 1


@sqlite_only
@pytest.mark.db
def test_backup_while_the_database_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    db = migrated(tmp_path)
    stop = threading.Event()

    def writer() -> None:
        conn = sqlite3.connect(db, timeout=30)
        i = 100
        while not stop.is_set():
            with conn:
                conn.execute(
                    "INSERT INTO users (id, name, created_at) VALUES (?, 'w', '2026-01-01')", (i,)
                )
            i += 1
        conn.close()

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        archives = [make_backup(load_settings(), tmp_path / "out") for _ in range(3)]
    finally:
        stop.set()
        thread.join()
    for archive in archives:
        assert verify(archive).tables["users"] >= 1


@sqlite_only
@pytest.mark.db
def test_a_damaged_archive_does_not_verify(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    migrated(tmp_path)
    archive = make_backup(load_settings(), tmp_path / "x.tar.gz")
    data = archive.read_bytes()
    archive.write_bytes(data[: len(data) // 2])
    with pytest.raises(BackupError, match="cannot read"):
        verify(archive)


@sqlite_only
@pytest.mark.db
def test_daily_backups_keep_the_newest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    migrated(tmp_path)
    monkeypatch.setenv("BACKUP_KEEP", "2")
    settings = load_settings()
    assert operations_results(settings)[-1].detail.endswith("none made yet")
    t0 = datetime.now(UTC) + timedelta(days=1)
    made = [daily_backup(settings, now=t0 + timedelta(days=d)) for d in range(4)]
    assert all(m is not None for m in made)
    assert daily_backup(settings, now=t0 + timedelta(days=3, hours=1)) is None  # not due yet
    kept = sorted(Path("data/backups").glob("*.tar.gz"))
    assert kept == sorted(m for m in made[2:] if m is not None)
    assert "keeping 2; newest" in operations_results(settings)[-1].detail
    monkeypatch.setenv("BACKUP_KEEP", "0")
    assert daily_backup(load_settings()) is None


def test_doctor_flags_a_world_readable_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    env = tmp_path / ".env"
    env.write_text("LLM_MODEL=m\n")
    env.chmod(0o644)
    first = operations_results(load_settings())[0]
    assert not first.ok and "chmod 600" in (first.fix or "")
    env.chmod(0o600)
    assert operations_results(load_settings())[0].ok


def test_service_unit_restarts_but_not_on_a_configuration_error(tmp_path: Path) -> None:
    proc = sidekick(tmp_path, "bot.cli", "service", "install", "--print")
    assert proc.returncode == 0, proc.stderr
    assert "Restart=on-failure" in proc.stdout and "RestartPreventExitStatus=2" in proc.stdout
    assert f"WorkingDirectory={tmp_path.resolve()}" in proc.stdout
    assert "RestartPreventExitStatus=2" in unit_text(None, system=True)


@pg_only
async def test_postgresql_backup_through_pg_dump_and_restore(tmp_path: Path) -> None:
    url = os.environ["DATABASE_URL"]
    (tmp_path / ".env").write_text("LLM_MODEL=m\n")
    proc = sidekick(tmp_path, "bot.cli", "migrate", DATABASE_URL=url)
    assert proc.returncode == 0, proc.stderr
    engine = create_engine(url)
    insert = "INSERT INTO users (id, telegram_id, name, created_at) VALUES (7, 7, 'pg', now())"
    try:
        async with engine.begin() as conn:
            await conn.execute(text(insert))
        settings = load_settings()
        archive = await asyncio.to_thread(make_backup, settings, tmp_path / "pg.tar.gz")
        assert (await asyncio.to_thread(verify, archive)).path == archive
        async with engine.begin() as conn:
            await conn.execute(text("DELETE FROM users"))
        await engine.dispose()  # pg_restore --clean drops the tables: no open sessions on them
        await asyncio.to_thread(restore, settings, archive, True)
        async with engine.connect() as conn:
            assert (await conn.execute(text("SELECT name FROM users"))).all() == [("pg",)]
    finally:
        await engine.dispose()


# Restores that must be refused before anything in the target changes, each with one line.

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A real install's backup (this checkout's code), and its home."""
    home = tmp_path_factory.mktemp("made")
    (home / ".env").write_text("LLM_MODEL=m\n")
    db = migrated_copy(home / "data")
    conn = sqlite3.connect(db)
    with conn:
        conn.execute(
            "INSERT INTO users (id, telegram_id, name, created_at) "
            "VALUES (1, 42, 'a', '2026-01-01')"
        )
    conn.close()
    (home / "data" / "inputs").mkdir()
    (home / "data" / "inputs" / "photo.jpg").write_bytes(b"new photo")
    settings = load_settings(env_file=home / ".env", data_dir=home / "data")
    return make_backup(settings, target=home / "out"), db


def target(tmp_path: Path) -> tuple[Path, object]:
    """An install holding data of its own: what a refused restore must leave as it is."""
    home = tmp_path / "target"
    (home / "data" / "inputs").mkdir(parents=True)
    (home / ".env").write_text("LLM_MODEL=m\n")
    (home / "data" / "sidekick.db").write_bytes(b"the old database")
    (home / "data" / "inputs" / "photo.jpg").write_bytes(b"old photo")
    return home, load_settings(env_file=home / ".env", data_dir=home / "data")


def snapshot(home: Path) -> dict[str, bytes]:
    """Every file but the lock a restore holds while it works (bot/ops/runlock.py)."""
    return {
        str(p.relative_to(home)): p.read_bytes()
        for p in sorted(home.rglob("*"))
        if p.is_file() and p.name != LOCK_FILE
    }


def rebuild(src: Path, out: Path, change: object) -> Path:
    """The archive `src` with `change(tar_out, members)` deciding what goes in."""
    import io
    import json as _json

    with tarfile.open(src, "r:gz") as tar:
        members = {m.name: (m, tar.extractfile(m).read() if m.isfile() else b"") for m in tar}  # type: ignore[union-attr]
    with tarfile.open(out, "w:gz") as tar:
        for m, data in change(members, _json).values():  # type: ignore[operator]
            m.size = len(data) if m.isfile() else 0
            tar.addfile(m, io.BytesIO(data) if m.isfile() else None)
    return out


def with_db(members: dict, db: bytes, json: object) -> dict:  # type: ignore[type-arg]
    m, _ = members["sidekick.db"]
    manifest_m, manifest = members["backup.json"]
    data = _manifest_for(db, json, manifest)
    return {**members, "sidekick.db": (m, db), "backup.json": (manifest_m, data)}


def _manifest_for(db: bytes, json: object, manifest: bytes) -> bytes:
    import tempfile as _tempfile

    from bot.ops.backup import table_counts

    loaded = json.loads(manifest)  # type: ignore[attr-defined]
    with _tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "x.db"
        path.write_bytes(db)
        try:
            loaded["tables"] = table_counts(path)
        except BackupError:
            pass
    return json.dumps(loaded).encode()  # type: ignore[attr-defined,no-any-return]


def db_bytes(good_db: Path, *sql: str) -> bytes:
    import tempfile as _tempfile

    with _tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "x.db"
        path.write_bytes(good_db.read_bytes())
        conn = sqlite3.connect(path)
        with conn:
            for statement in sql:
                conn.execute(statement)
        conn.close()
        return path.read_bytes()


def empty_db() -> bytes:
    import tempfile as _tempfile

    with _tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "x.db"
        sqlite3.connect(path).close()
        return path.read_bytes()


def link_member(members: dict, json: object) -> dict:  # type: ignore[type-arg]
    link = tarfile.TarInfo("data/inputs/passwd")
    link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
    return {**members, link.name: (link, b"")}


CASES = {
    "corrupt": (
        lambda ms, j: with_db(ms, b"SQLite format 3\0" + b"\x99" * 4000, j),
        "not a readable SQLite database",
    ),
    "empty": (lambda ms, j: with_db(ms, empty_db(), j), "no migration stamp"),
    "trigger": (
        lambda ms, j: with_db(
            ms,
            db_bytes(
                GOOD_DB[0], "CREATE TRIGGER t AFTER INSERT ON users BEGIN DELETE FROM users; END"
            ),
            j,
        ),
        "trigger 't'",
    ),
    "extra table": (
        lambda ms, j: with_db(ms, db_bytes(GOOD_DB[0], 'CREATE TABLE "we""ird" (x)'), j),
        "table 'we\"ird'",
    ),
    "missing column": (
        lambda ms, j: with_db(
            ms, db_bytes(GOOD_DB[0], "ALTER TABLE users DROP COLUMN usage_warned"), j
        ),
        "missing column users.usage_warned",
    ),
    "link": (link_member, "is a link or a device"),
    "manifest list": (
        lambda ms, j: {**ms, "backup.json": (ms["backup.json"][0], b"[1, 2]")},
        "not a format-1",
    ),
    "manifest files": (
        lambda ms, j: {
            **ms,
            "backup.json": (
                ms["backup.json"][0],
                b'{"format": 1, "database": "sqlite", "files": "x"}',
            ),
        },
        "files is not a list",
    ),
}
GOOD_DB: list[Path] = []


@sqlite_only
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.db
def test_a_bad_archive_is_refused_in_one_line_and_the_target_is_untouched(
    case: str, good: tuple[Path, Path], tmp_path: Path
) -> None:
    archive, good_db = good
    GOOD_DB[:] = [good_db]
    change, said = CASES[case]
    bad = rebuild(archive, tmp_path / "bad.tar.gz", change)
    home, settings = target(tmp_path)
    before = snapshot(home)
    with pytest.raises(BackupError) as caught:
        restore(settings, bad, force=True)  # type: ignore[arg-type]
    message = str(caught.value)
    assert said in message and "\n" not in message, message
    assert snapshot(home) == before


@sqlite_only
@pytest.mark.db
def test_a_2_gib_member_is_refused_before_extraction(
    good: tuple[Path, Path], tmp_path: Path
) -> None:
    archive, _ = good
    bad = tmp_path / "huge.tar.gz"
    with tarfile.open(archive, "r:gz") as src, gzip.open(bad, "wb") as out:
        for m in src:
            if m.name == "data/inputs/photo.jpg":
                # 2 GiB declared, the archive cut after 1 MiB of it: refused at its header.
                m.size = 2 << 30
                out.write(m.tobuf(format=tarfile.GNU_FORMAT) + bytes(1 << 20))
                break
            data = src.extractfile(m).read() if m.isfile() else b""  # type: ignore[union-attr]
            out.write(m.tobuf(format=tarfile.GNU_FORMAT) + data + bytes(-len(data) % 512))
    home, settings = target(tmp_path)
    before = snapshot(home)
    with pytest.raises(BackupError, match="over the 1 GiB cap"):
        restore(settings, bad, force=True)  # type: ignore[arg-type]
    assert snapshot(home) == before


@sqlite_only
@pytest.mark.db
def test_a_good_restore_replaces_the_files_and_the_database_together(
    good: tuple[Path, Path], tmp_path: Path
) -> None:
    archive, _ = good
    home, settings = target(tmp_path)
    (home / "data" / "stale.txt").write_text("not in the backup")
    (home / "data" / "sidekick.log").write_text("a log line\n")
    restore(settings, archive, force=True)  # type: ignore[arg-type]
    data = home / "data"
    assert (data / "inputs" / "photo.jpg").read_bytes() == b"new photo"
    assert rows(data / "sidekick.db", "users") == 1
    assert not (data / "stale.txt").exists()  # replaced by the backup, not merged into it
    assert (data / "sidekick.log").read_text() == "a log line\n"  # logs are left alone
    assert not [p for p in data.iterdir() if p.name.startswith(".restore-")]


@sqlite_only
@pytest.mark.db
def test_the_cli_says_a_refused_restore_in_one_line(
    good: tuple[Path, Path], tmp_path: Path
) -> None:
    archive, good_db = good
    GOOD_DB[:] = [good_db]
    bad = rebuild(archive, tmp_path / "bad.tar.gz", CASES["trigger"][0])
    home, _ = target(tmp_path)
    proc = sidekick(home, "bot.cli", "restore", str(bad), "--force", PYTHONPATH=str(ROOT))
    assert proc.returncode == 1
    assert proc.stderr.count("\n") == 1 and "trigger 't'" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert (home / "data" / "sidekick.db").read_bytes() == b"the old database"
