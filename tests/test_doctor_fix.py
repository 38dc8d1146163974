"""`sidekick doctor --fix`: file modes of .env (600) and the data folder (700), missing
folders, pending migrations applied, and bubblewrap installed with apt-get as root (its
install line printed otherwise)."""

from __future__ import annotations

import asyncio
import os
import shutil
import stat
import sys
from pathlib import Path

import pytest
from sqlalchemy.engine import Connection

from bot.ops.doctor_fix import APT_LINE, fix_bubblewrap
from db.engine import create_engine
from db.migrate import alembic_config, pending
from tests.fakes.openai_server import FakeOpenAI

ROOT = Path(__file__).resolve().parents[1]
CHMOD = shutil.which("chmod") or "/bin/chmod"  # the tests below leave PATH without it


async def at_revision(url: str, revision: str) -> None:
    from alembic import command

    cfg = alembic_config()
    engine = create_engine(url)

    def run(conn: Connection) -> None:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)

    try:
        async with engine.begin() as conn:
            await conn.run_sync(run)
    finally:
        await engine.dispose()


@pytest.mark.db
async def test_fix_sets_modes_makes_folders_and_migrates(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    data.chmod(0o755)
    url = f"sqlite+aiosqlite:///{data / 'sidekick.db'}"
    await at_revision(url, "0013")
    env = tmp_path / ".env"
    env.write_text(f"LLM_MODEL=fake-model\nLLM_BASE_URL={fake_llm.base_url}\nBACKUP_KEEP=3\n")
    env.chmod(0o644)
    # The SQLite file above, also under make test-pg.
    environ = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    # Not blocking: the fake model answers the doctor's model check from this event loop.
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", "doctor", "--fix", cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
        env={**environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    out = (await asyncio.wait_for(proc.communicate(), 600))[0].decode()
    assert f"fixed: {env.resolve()} was 644, now 600" in out, out
    assert f"fixed: {data.resolve()} was 755, now 700" in out
    assert stat.S_IMODE(env.stat().st_mode) == 0o600
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    assert (data / "backups").is_dir()
    assert "fixed: applied" in out and "0014" in out
    engine = create_engine(url)
    try:
        assert await pending(engine) == []
    finally:
        await engine.dispose()


def fake_apt(bin_dir: Path, works: bool) -> Path:
    """An apt-get that records its arguments and, installing bubblewrap, puts a bwrap on
    PATH as the real one would."""
    log = bin_dir / "apt.log"
    bwrap = bin_dir / "bwrap"
    install = f'printf "#!/bin/sh\\n" > {bwrap}; {CHMOD} +x {bwrap}' if works else "exit 100"
    (bin_dir / "apt-get").write_text(
        f'#!/bin/sh\necho "$@" >> {log}\ncase "$1" in install) {install};; esac\n'
    )
    (bin_dir / "apt-get").chmod(0o755)
    return log


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="bubblewrap is Linux's")
def test_bubblewrap_installed_as_root_else_its_line_printed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    log = fake_apt(tmp_path, works=True)
    [told] = fix_bubblewrap(root=False)
    assert not told.ok and told.fix.startswith(APT_LINE) and not log.exists()
    [done] = fix_bubblewrap(root=True)
    assert done.ok and "installed" in done.detail
    assert log.read_text().splitlines() == ["update -qq", "install -y -qq bubblewrap"]
    assert fix_bubblewrap(root=True) == []  # there now: nothing to do


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="bubblewrap is Linux's")
def test_a_failed_install_says_so_with_the_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    fake_apt(tmp_path, works=False)
    [failed] = fix_bubblewrap(root=True)
    assert not failed.ok and "install -y -qq bubblewrap failed" in failed.detail
    assert failed.fix == APT_LINE
