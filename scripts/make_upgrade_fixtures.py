"""Regenerate tests/fixtures/upgrade/*.db.gz: SQLite databases made by earlier versions of
this repository, each by its own migrations, for tests/test_upgrade.py.

For each commit below, the old tree is checked out beside this one (`git worktree add
--detach`), its own `alembic upgrade head` makes a fresh database (its env.py, its models,
its migration files: exactly what an install of that version had), a few rows go in, and the
file is gzipped into the fixtures folder. Run from the repository root:

    PYTHONPATH= .venv/bin/python scripts/make_upgrade_fixtures.py

The fixtures are kept in git because the old trees need not stay buildable; the script
documents how they were made and remakes them if a case is added.
"""

from __future__ import annotations

import gzip
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "upgrade"

# name -> (commit on main's first-parent line, what an install of it had).
VERSIONS = {
    "0006-first-line": ("82c215e", "migrations made one line (head 0006)"),
    # Issue 13's merge numbered its migration 0009 on top of 0006; issue 12's merge then put
    # 0008 (model_usage, three users columns) under 0009, so Alembic thinks 0008 is applied.
    "0009-misstamped": ("d2639f8", "0009 (message kind) directly after 0006, no 0008"),
    "0007-schedules": ("1ba221c", "usage and schedules merged (head 0007 after 0009)"),
    "0010-workers": ("e6c1449", "several workers (head 0010)"),
    "0013-outbox": ("5f32331", "voice and the outbox (head 0013)"),
    "0014-approvals": ("a698825", "approvals, before features got one folder each (head 0014)"),
}

ROWS = [
    "INSERT INTO users (id, telegram_id, name, created_at) "
    "VALUES (1, 42, 'Ann', '2026-01-01 10:00:00')",
    "INSERT INTO sessions (id, user_id, name, started_at) "
    "VALUES (1, 1, 'first', '2026-01-01 10:00:00')",
    *(
        "INSERT INTO messages (session_id, user_id, role, content, request_id, created_at) "
        f"VALUES (1, 1, 'user', 'message {i}', 'req-{i}', '2026-01-01 10:00:0{i}')"
        for i in (1, 2, 3)
    ),
]


def make(name: str, commit: str, tmp: Path) -> Path:
    tree = tmp / name
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), commit],
        check=True,
        capture_output=True,
    )
    try:
        db = tmp / f"{name}.db"
        env = {**os.environ, "PYTHONPATH": str(tree), "DATABASE_URL": f"sqlite+aiosqlite:///{db}"}
        env.pop("SIDEKICK_HOME", None)
        subprocess.run(
            [sys.executable, "-m", "alembic", "upgrade", "head"], cwd=tree, env=env, check=True
        )
        conn = sqlite3.connect(db)
        with conn:
            for sql in ROWS:
                conn.execute(sql)
        conn.execute("VACUUM")
        conn.close()
        return db
    finally:
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=True
        )


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="sidekick-fixtures-") as tmp:
        for name, (commit, about) in VERSIONS.items():
            db = make(name, commit, Path(tmp))
            target = OUT / f"{name}.db.gz"
            with db.open("rb") as src, gzip.GzipFile(target, "wb", mtime=0) as dst:
                shutil.copyfileobj(src, dst)
            print(f"{target.relative_to(ROOT)}: {commit} ({about}), {target.stat().st_size} bytes")


if __name__ == "__main__":
    main()
