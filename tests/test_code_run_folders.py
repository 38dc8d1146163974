"""A run's folders on the host: created private and fresh (never one that was there
before), walked within bounds, removed however deep, and the run traced whatever it left."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from sqlalchemy import select

from tests.test_code_helpers import STRONG_MODES, Env, env
from tools.code import files, tree
from tools.code.models import CodeExecution
from tools.code.sandbox import prepare_workdir

__all__ = ["env"]

DEEP = 2000

# A tree far deeper than Python's recursion limit under output/, built by walking down
# (the full path would pass PATH_MAX), with a file at the top and one deep inside.
DEEP_OUTPUT = f"""
import {{ mkdirSync, writeFileSync }} from "node:fs";
writeFileSync("output/top.txt", "top");
process.chdir("output");
for (let i = 0; i < {DEEP}; i++) {{
  mkdirSync("d");
  process.chdir("d");
  if (i === 1500) writeFileSync("deep.txt", "deep");
}}
console.log("built");
"""


def make_deep(top: Path, depth: int) -> None:
    fd = os.open(top, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for i in range(depth):
            os.mkdir("d", dir_fd=fd)
            if i % 500 == 0:
                os.close(os.open("f", os.O_WRONLY | os.O_CREAT, dir_fd=fd))
            child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
    finally:
        os.close(fd)


def mode_of(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.mark.parametrize("mode", [*STRONG_MODES, pytest.param("off", id="off")])
async def test_a_deep_output_tree_is_bounded_cleaned_up_and_traced(env: Env, mode: str) -> None:
    svc = env.service(code_sandbox="off") if mode == "off" else env.in_mode(mode)
    assert svc.runner is not None
    base = Path(tempfile.mkdtemp(prefix="sidekick-deep-"))
    os.chmod(base, 0o755)  # traversable by the run's throwaway uid
    svc.runner.workbase = base
    try:
        # It may finish, or be stopped past the runner's cap on entries under output/
        # (the tree still passes a thousand levels): either way it is collected and traced.
        row_id, res, cat = await svc.execute(DEEP_OUTPUT, 30000, env.call())
        assert res.sandbox_error is None and cat in (None, "output_limit"), res
        assert res.outputs is not None
        assert res.outputs.files == [("top.txt", b"top")]
        assert any("deeper than" in s for s in res.outputs.skipped), res.outputs.skipped
        async with env.deps.session_factory() as s:
            row = (
                await s.execute(select(CodeExecution).where(CodeExecution.id == row_id))
            ).scalar_one()
        assert row.exit_code == res.exit_code and row.error_category == cat
        assert os.listdir(base) == []  # work dir, input/ and output/ all removed
    finally:
        tree.remove_tree(base)


def test_remove_tree_handles_a_tree_deeper_than_the_recursion_limit(tmp_path: Path) -> None:
    top = tmp_path / "run"
    top.mkdir()
    make_deep(top, DEEP)
    os.chmod(top / "d", 0)  # the code may take our rights away
    assert tree.remove_tree(top) is True
    assert not top.exists()
    assert tree.remove_tree(top) is True  # gone already: nothing to do


def test_the_walk_is_bounded_in_depth_and_entries(tmp_path: Path) -> None:
    make_deep(tmp_path, 300)
    found = tree.walk_files(str(tmp_path), max_depth=16)
    assert [f.rel for f in found.files] == ["f"]
    assert found.left_out == [f"{'d/' * 16}d: deeper than 16 folders; not read"]
    wide = tmp_path / "wide"
    wide.mkdir()
    for i in range(50):
        (wide / f"{i:02}").write_bytes(b"x")
    found = tree.walk_files(str(wide), max_entries=20)
    assert len(found.files) == 20
    assert found.left_out == ["more than 20 entries; the rest was not read"]
    shutil.rmtree(wide)


def test_run_folders_are_fresh_and_private(tmp_path: Path) -> None:
    work = prepare_workdir(tmp_path, None, "bwrap")
    io = files.io_dir(work)
    assert io.parent == work.parent and mode_of(work.parent) & 0o022 == 0
    assert mode_of(work) == 0o700
    files.private_dir(io)
    files.stage(io, None, None)
    for d in (io, io / files.INPUT_DIR, io / files.OUTPUT_DIR):
        assert mode_of(d) == 0o700, d
    with pytest.raises(FileExistsError):
        files.private_dir(io)
    tree.remove_tree(work.parent)


def test_a_pre_created_folder_is_refused(tmp_path: Path) -> None:
    # Another account made output/ (and planted a file) before the run: staging refuses
    # it rather than use it, so nothing of theirs is sent to the user as the code's output.
    io = tmp_path / "run.io"
    io.mkdir()
    (io / files.OUTPUT_DIR).mkdir()
    (io / files.OUTPUT_DIR / "planted.txt").write_text("from someone else")
    with pytest.raises(FileExistsError):
        files.stage(io, None, None)
    with pytest.raises(FileExistsError):
        files.private_dir(io)


def test_the_uploads_folders_are_private(tmp_path: Path) -> None:
    base = tmp_path / "inputs"
    base.mkdir(mode=0o755)
    os.chmod(base, 0o755)  # made by an older version, readable by others
    store = files.InputStore(base)
    store.write("tg1", "report.pdf", b"%PDF")
    assert mode_of(base) == 0o700
    assert mode_of(store.dir_for("tg1")) == 0o700
    assert mode_of(store.dir_for("tg1") / "report.pdf") & 0o077 == 0


def test_the_database_its_wal_and_the_data_folder_are_private(tmp_path: Path) -> None:
    # Every command's settings pass the preflight; after it, what the bot creates is its own.
    script = f"""
import argparse, os, sqlite3, stat
from pathlib import Path
from bot.cli import configure
data = Path({str(tmp_path)!r}) / "data"
os.umask(0o022)
def configured(db):
    os.environ.update(TELEGRAM_BOT_TOKEN="1:x", LLM_MODEL="m", DATA_DIR=str(data),
                      DATABASE_URL="sqlite+aiosqlite:///" + str(db))
    configure(argparse.Namespace(env_file=None), "run")
configured(data / "db" / "bot.db")
old = data / "db" / "old.db"  # made by an earlier version, readable by others
old.parent.mkdir(parents=True, exist_ok=True); old.touch(); old.chmod(0o644)
configured(old)
print("old.db", oct(stat.S_IMODE(os.stat(old).st_mode)))
db = sqlite3.connect(data / "db" / "bot.db")
db.execute("pragma journal_mode=wal"); db.execute("create table t (x)"); db.commit()
for p in (data, data / "db", data / "db" / "bot.db", data / "db" / "bot.db-wal",
          data / "db" / "bot.db-shm"):
    print(p.name, oct(stat.S_IMODE(os.stat(p).st_mode)))
"""
    env = {k: v for k, v in os.environ.items() if k != "MCP_CONFIG"}
    env["SIDEKICK_HOME"] = str(tmp_path)  # no .env there: the settings above only
    res = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env
    )
    assert res.returncode == 0, res.stderr
    modes = dict(line.split() for line in res.stdout.splitlines())
    assert modes == {
        "old.db": "0o600",
        "data": "0o700",
        "db": "0o700",
        "bot.db": "0o600",
        "bot.db-wal": "0o600",
        "bot.db-shm": "0o600",
    }
