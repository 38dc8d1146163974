"""A checkout under /root (mode 700): the venv's bun is out of the sandbox uid's reach. The
code tool runs it from a neutral path instead, in every sandbox mode, and doctor's trial run
passes; doctor does not suggest installing a bubblewrap that is installed."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.app import build_app
from tests.conftest import make_settings
from tests.fakes.openai_server import FakeOpenAI
from tools.code import modes
from tools.code.bun import NEUTRAL, locate_bun
from tools.code.feature import FEATURE

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="a throwaway uid needs root"),
    pytest.mark.db,  # every test here opens its own database
]


@pytest.fixture
def private_bun(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    home = tmp_path / "root-home"
    (home / "bin").mkdir(parents=True)
    home.chmod(0o700)  # as /root is
    bun = home / "bin" / "bun"
    shutil.copy2(locate_bun(), bun)
    monkeypatch.setenv("PATH", f"{home / 'bin'}:{os.environ['PATH']}")
    yield bun
    st = bun.stat()  # the neutral copy of this test's bun: not left behind in /var/tmp
    shutil.rmtree(NEUTRAL / f"{st.st_dev:x}-{st.st_ino:x}-{st.st_mtime_ns:x}", ignore_errors=True)


@pytest.mark.parametrize("bwrap", ["usable", "refused"])
async def test_the_trial_run_passes_with_bun_in_a_private_folder(
    private_bun: Path,
    tmp_path: Path,
    fake_llm: FakeOpenAI,
    monkeypatch: pytest.MonkeyPatch,
    bwrap: str,
) -> None:
    if bwrap == "refused":  # a container without user namespaces: the next mode down
        monkeypatch.setattr(modes, "bwrap_works", lambda path: "setting up uid map: denied")
    app = await build_app(make_settings(tmp_path, fake_llm))
    check = FEATURE.adds.doctor
    assert check is not None
    try:
        lines = {line.name: line for line in await check(app)}
    finally:
        await app.close()
    trial = lines["code trial run"]
    assert trial.ok, trial.detail
    assert lines["bun"].ok and str(private_bun) not in lines["bun"].detail
    sandbox = lines["code sandbox"]
    assert "apt-get install bubblewrap" not in f"{sandbox.detail} {sandbox.fix}"
