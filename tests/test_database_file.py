"""A database file deleted or replaced under the running bot is logged at once (once), and
`sidekick doctor` says when the file it was about to open was missing from a used folder."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest

from bot.ops.doctor import database_was_missing
from scheduler.dbfile import DatabaseFileWatch
from tests.conftest import make_settings, sqlite_only

pytestmark = pytest.mark.db  # every test here opens its own database


async def test_a_deleted_database_file_is_logged_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = tmp_path / "sidekick.db"
    opened = sqlite3.connect(db)  # the bot holds it open (its inode is not reused)
    opened.execute("create table t(x)")
    watch = DatabaseFileWatch(db)
    with caplog.at_level(logging.WARNING, logger="scheduler.dbfile"):
        assert await watch.check() is None
        db.unlink()
        assert await watch.check() == "was deleted"
        assert await watch.check() == "was deleted"
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and str(db) in warnings[0] and "restart" in warnings[0]
    sqlite3.connect(db).close()  # a new file at the same path is not the one opened
    assert await watch.check() == "was replaced by another file"
    opened.close()


@sqlite_only  # a database file
def test_doctor_names_a_database_missing_from_a_used_folder(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    data = Path(settings.data_dir)
    data.mkdir(parents=True, exist_ok=True)
    (data / "sidekick.db").unlink(missing_ok=True)  # make_settings starts it from a template
    assert database_was_missing(settings) is None  # a first start: nothing to miss
    (data / "uploads").mkdir()
    found = database_was_missing(settings)
    assert found is not None and not found.ok and "was missing" in found.detail
    sqlite3.connect(data / "sidekick.db").close()
    assert database_was_missing(settings) is None
