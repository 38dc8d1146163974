"""A process pays at import for what it uses: `sidekick --version`, --help and a bad
setting's exit read no more than the arguments and the settings (no database layer, no web
server, no numpy, no aiogram), and setting up the features leaves the dashboard's server and
the code tool's model relay unloaded while nothing switched them on. Each case runs in a
fresh interpreter, as the command does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("sqlalchemy", "aiohttp", "numpy", "sqlite_vec", "aiogram", "httpx", "db.engine")


def loaded(code: str, home: Path, **env: str) -> tuple[list[str], str]:
    """The HEAVY modules `code` left in sys.modules, and what it wrote to stderr."""
    probe = f"""
import contextlib, json, sys
{code}
print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))
"""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_", "SIDEKICK"))}
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=home,
        env={**clean, "PYTHONPATH": str(ROOT), "SIDEKICK_HOME": str(home), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


CLI = """
from bot.cli import main
with contextlib.redirect_stdout(sys.stderr), contextlib.suppress(SystemExit):
    print("exit", main({argv!r}))
"""


def test_version_and_help_import_nothing_heavy(tmp_path: Path) -> None:
    for argv in (["--version"], ["--help"], ["doctor", "--help"]):
        found, _ = loaded(CLI.format(argv=argv), tmp_path)
        assert found == [], argv


def test_a_bad_setting_exits_without_the_database_or_the_features(tmp_path: Path) -> None:
    found, err = loaded(CLI.format(argv=["doctor"]), tmp_path, LOG_LEVEL="loud")
    assert "configuration error: LOG_LEVEL" in err and "exit 2" in err
    assert found == []


def test_switched_off_parts_stay_unloaded_when_the_features_are_set_up(tmp_path: Path) -> None:
    code = """
from bot.features import FEATURES
assert [f.adds for f in FEATURES]
unused = ("aiohttp", "bot.dashboard.server", "tools.code.relay_server")
print(json.dumps(sorted(m for m in unused if m in sys.modules)), file=sys.stderr)
"""
    _, err = loaded(code, tmp_path)
    assert json.loads(err.strip().splitlines()[-1]) == []


def test_migrate_on_an_up_to_date_database_loads_neither_alembic_nor_aiogram(
    tmp_path: Path,
) -> None:
    """`sidekick migrate` knows "up to date" from the stamp and the migration files (the
    schema check still runs: tests/test_upgrade.py), and no command that never talks to
    Telegram imports aiogram."""
    shown = '("alembic", "aiogram")'
    code = (
        CLI + f"print(json.dumps(sorted(m for m in {shown} if m in sys.modules)), file=sys.stderr)"
    )
    # SQLite's fast path (PostgreSQL asks Alembic): a file of its own, not the `db` tier's.
    db = {"DATABASE_URL": f"sqlite:///{tmp_path / 'up-to-date.db'}", "DATA_DIR": str(tmp_path)}
    for argv, heavy in ((["migrate"], ["alembic"]), (["migrate"], []), (["status"], [])):
        _, err = loaded(code.format(argv=argv), tmp_path, **db)
        assert "exit 0" in err, err
        assert json.loads(err.strip().splitlines()[-1]) == heavy, argv
