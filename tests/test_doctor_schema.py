"""`sidekick doctor` names every table, view and trigger beside what the migrations make: a
trigger that deleted memories on every message passed as "the schema matches"."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.conftest import migrated_copy
from tests.test_upgrade import migrate

pytestmark = pytest.mark.db  # a child process opens its own database


def migrations_line(tmp_path: Path) -> str:
    _, out, _ = migrate(tmp_path, "doctor")
    (line,) = [line for line in out.splitlines() if "migrations" in line]
    return line


def test_doctor_reports_extra_triggers_views_and_tables(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("LLM_MODEL=m\n")
    migrated_copy(tmp_path / "data")
    assert "the schema matches" in migrations_line(tmp_path)  # the memory index's own: fine
    conn = sqlite3.connect(tmp_path / "data" / "sidekick.db")
    with conn:
        conn.execute(
            "CREATE TRIGGER forget AFTER INSERT ON messages BEGIN DELETE FROM memories; END"
        )
        conn.execute("CREATE VIEW everything AS SELECT * FROM messages")
        conn.execute("CREATE TABLE stash (secret TEXT)")
    conn.close()
    line = migrations_line(tmp_path)
    assert line.startswith("FAIL") and "schema differs" in line
    for extra in ("trigger forget", "view everything", "table stash"):
        assert f"not in the models: {extra}" in line, line
