"""Upgrading (`git pull && make run`): database files made by earlier versions of this
repository, each by its own migrations (tests/fixtures/upgrade, made by
scripts/make_upgrade_fixtures.py), are brought to head by today's code, end with the schema
the models declare, and keep their rows. A database whose schema still differs after its
migrations (its stamp says applied what never ran) starts nothing and says what is missing."""

from __future__ import annotations

import gzip
import shutil
import sqlite3
from pathlib import Path

import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine as sync_engine

from bot.features import metadata
from db.migrate import alembic_config, differences
from tests.test_config import sidekick

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "upgrade"
NOWHERE = "http://127.0.0.1:9/v1"  # as tests/conftest.py make_settings has it
NAMES = sorted(p.name.removesuffix(".db.gz") for p in FIXTURES.glob("*.db.gz"))


def unpack(name: str, tmp_path: Path) -> Path:
    db = tmp_path / "data" / "sidekick.db"
    db.parent.mkdir()
    with gzip.open(FIXTURES / f"{name}.db.gz", "rb") as src, db.open("wb") as dst:
        shutil.copyfileobj(src, dst)
    (tmp_path / ".env").write_text("LLM_MODEL=m\n")
    return db


def migrate(tmp_path: Path, *args: str) -> tuple[int, str, str]:
    # This checkout's code, whatever an editable install elsewhere points at. The doctor
    # probes the model's endpoint (and speech on it): a closed port on loopback refuses at
    # once, where the default one would be looked up and tried on the internet.
    proc = sidekick(
        tmp_path, "bot.cli", *(args or ("migrate",)), PYTHONPATH=str(ROOT), LLM_BASE_URL=NOWHERE
    )
    return proc.returncode, proc.stdout, proc.stderr


def schema_differences(db: Path) -> list[str]:
    engine = sync_engine(f"sqlite:///{db}")
    try:
        with engine.connect() as conn:
            return differences(conn, metadata())
    finally:
        engine.dispose()


def test_fixtures_cover_the_mis_stamped_database() -> None:
    assert "0009-misstamped" in NAMES and len(NAMES) >= 5


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.db
def test_an_earlier_versions_database_upgrades_to_the_models_and_keeps_its_rows(
    name: str, tmp_path: Path
) -> None:
    db = unpack(name, tmp_path)
    code, out, err = migrate(tmp_path)  # what `make run` does at start
    assert code == 0, err
    assert "up to date" in out
    assert schema_differences(db) == []
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    conn = sqlite3.connect(db)
    try:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [(head,)]
        assert conn.execute("SELECT name FROM users").fetchall() == [("Ann",)]
        contents = [r[0] for r in conn.execute("SELECT content FROM messages ORDER BY id")]
        assert contents == ["message 1", "message 2", "message 3"]
    finally:
        conn.close()


@pytest.mark.db
def test_a_schema_that_still_differs_starts_nothing_and_says_what_is_missing(
    tmp_path: Path,
) -> None:
    db = unpack("0014-approvals", tmp_path)
    assert migrate(tmp_path)[0] == 0
    conn = sqlite3.connect(db)  # what an older upgrade of a mis-stamped database left
    with conn:
        conn.execute("DROP TABLE model_usage")
        conn.execute("ALTER TABLE users DROP COLUMN usage_warned")
    conn.close()
    with (tmp_path / ".env").open("a") as env:  # `run` starts as far as the database
        env.write("TELEGRAM_BOT_TOKEN=123:abc\nTELEGRAM_API_URL=http://127.0.0.1:9\n")
    for command in ("migrate", "run"):
        code, out, err = migrate(tmp_path, command)
        assert code == 2, (out, err)
        (line,) = [line for line in err.splitlines() if line.startswith("sidekick:")]
        assert "missing table model_usage" in line and "missing column users.usage_warned" in line
        assert "Traceback" not in err and "up to date" not in out
    code, out, _ = migrate(tmp_path, "doctor")
    assert code != 0
    (shown,) = [line for line in out.splitlines() if "migrations" in line]
    assert "schema differs" in shown and "missing table model_usage" in shown
    assert "missing column users.usage_warned" in shown
