"""What `make run` does on a stock machine before the bot starts: a Python without its venv
module, a .venv that cannot be used, a missing .env."""

from __future__ import annotations

import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAKEFILE = ROOT / "Makefile"

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def make(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["make", "-s", "-f", str(MAKEFILE), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_python_without_venv_gets_one_line_naming_the_package(tmp_path: Path) -> None:
    # Debian's python3 without python3-venv: `import ensurepip` fails, the rest works.
    fake = tmp_path / "python3"
    fake.write_text(
        f'#!/bin/sh\ncase "$*" in *ensurepip*) exit 1;; esac\nexec {sys.executable} "$@"\n'
    )
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    proc = make(tmp_path, "python-check", f"PYTHON={fake}", f"VENV={tmp_path / '.venv'}")
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert "apt-get install python3-venv" in lines[0] and "Traceback" not in proc.stderr


def test_a_venv_without_pip_is_rebuilt(tmp_path: Path) -> None:
    venv = tmp_path / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    proc = make(tmp_path, "venv", f"PYTHON={sys.executable}", f"VENV={venv}")
    assert proc.returncode == 0, proc.stderr
    assert "rebuilding" in proc.stdout
    check = subprocess.run([str(venv / "bin" / "python"), "-c", "import pip"], check=False)
    assert check.returncode == 0


def test_env_is_made_from_the_example_readable_by_its_owner_only(tmp_path: Path) -> None:
    shutil.copy(ROOT / ".env.example", tmp_path / ".env.example")
    proc = make(tmp_path, ".env")
    assert proc.returncode == 0, proc.stderr
    assert stat.S_IMODE((tmp_path / ".env").stat().st_mode) == 0o600
    assert "TELEGRAM_BOT_TOKEN" in proc.stdout
    (tmp_path / ".env").write_text("LLM_MODEL=mine\n")
    assert make(tmp_path, ".env").returncode == 0  # an existing .env is left alone
    assert (tmp_path / ".env").read_text() == "LLM_MODEL=mine\n"


@pytest.mark.parametrize("target", ["run", "chat"])
def test_ctrl_c_of_the_bot_is_no_error_of_makes(tmp_path: Path, target: str) -> None:
    """The bot ends with status 130 after Ctrl-C: make said "Error 130" over it."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "sidekick"
    fake.write_text("#!/bin/sh\nexit 130\n")  # what `sidekick run` returns on Ctrl-C
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    proc = make(tmp_path, target, "-o", "install", "-o", ".env", f"BIN={bin_dir}")
    assert proc.returncode == 0 and "Error" not in proc.stderr, proc.stderr
    fake.write_text("#!/bin/sh\nexit 1\n")  # a real failure still is one
    assert make(tmp_path, target, "-o", "install", "-o", ".env", f"BIN={bin_dir}").returncode != 0


def test_docker_up_without_compose_names_the_package(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("LLM_MODEL=mine\n")
    empty = tmp_path / "bin"  # neither docker nor docker-compose on PATH
    empty.mkdir()
    proc = subprocess.run(
        [shutil.which("make") or "make", "-s", "-f", str(MAKEFILE), "docker-up"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": str(empty)},
    )
    assert proc.returncode != 0
    line = proc.stderr.strip().splitlines()[0]  # then make's own "Error 1"
    assert "Docker Compose is missing" in line
    assert "apt-get install docker.io docker-compose" in line
