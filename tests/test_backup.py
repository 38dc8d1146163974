"""`sidekick backup` / `restore`: a real archive of a real database, verified, restored."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import tarfile
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import text

from bot.backup import BackupError, daily_backup, make_backup, verify
from bot.config import load_settings
from bot.ops_commands import operations_results, unit_text
from bot.restore import restore
from db.engine import create_engine
from tests.conftest import pg_only, sqlite_only
from tests.test_config import sidekick


def migrated(home: Path) -> Path:
    """A database made by `sidekick migrate`, with rows in it, and a user file beside it."""
    proc = sidekick(home, "bot.cli", "migrate")
    assert proc.returncode == 0, proc.stderr
    db = home / "data" / "sidekick.db"
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


def test_backup_verify_restore_round_trip(tmp_path: Path) -> None:
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
    # Now the target holds data: a second restore needs --force.
    proc = sidekick(other, "bot.cli", "restore", str(archive))
    assert proc.returncode == 1 and "--force" in proc.stderr
    proc = sidekick(other, "bot.cli", "restore", str(archive), "--force")
    assert proc.returncode == 0, proc.stderr
    assert rows(other / "data" / "sidekick.db", "users") == 1


@sqlite_only
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
def test_a_damaged_archive_does_not_verify(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    migrated(tmp_path)
    archive = make_backup(load_settings(), tmp_path / "x.tar.gz")
    data = archive.read_bytes()
    archive.write_bytes(data[: len(data) // 2])
    with pytest.raises(BackupError, match="cannot read"):
        verify(archive)


@sqlite_only
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
