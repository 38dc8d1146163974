"""The operator's commands: `sidekick backup`, `restore` and `service install`."""

from __future__ import annotations

import argparse
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from bot.config import Settings, env_path, sidekick_home
from tools.base import CheckResult

if TYPE_CHECKING:
    from bot.app import App

UNIT_NAME = "sidekick.service"


def unit_text(env_file: Path | None, system: bool) -> str:
    """A unit that restarts the bot after a crash or a lost network, but not after a
    configuration error (exit status 2): that needs a person, and a restart loop would only
    bury the one line that says what to fix."""
    home = sidekick_home().resolve()
    run = f"{sys.executable} -m bot"
    if env_file is not None:
        run += f" --env-file {env_path(env_file).resolve()}"
    user = f"User={os.environ.get('SUDO_USER') or 'root'}\n" if system else ""
    return (
        "[Unit]\n"
        "Description=Sidekick, a personal assistant in Telegram\n"
        "Wants=network-online.target\n"
        "After=network-online.target\n\n"
        "[Service]\n"
        "Type=simple\n"
        f"{user}"
        f"WorkingDirectory={home}\n"
        f"Environment=SIDEKICK_HOME={home}\n"
        f"ExecStart={run} run\n"
        "Restart=on-failure\n"
        "RestartSec=10\n"
        "RestartPreventExitStatus=2\n\n"
        "[Install]\n"
        f"WantedBy={'multi-user.target' if system else 'default.target'}\n"
    )


def install_service(env_file: Path | None, only_print: bool) -> int:
    system = os.geteuid() == 0
    text = unit_text(env_file, system)
    if only_print:
        print(text, end="")
        return 0
    if system:
        path, ctl = Path("/etc/systemd/system") / UNIT_NAME, ["systemctl"]
    else:
        config = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
        path, ctl = config / "systemd/user" / UNIT_NAME, ["systemctl", "--user"]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    print(f"wrote {path}")
    if shutil.which("systemctl") is None:
        print("no systemctl here: start it with your init system, or run `make run` under it")
        return 0
    for step in (["daemon-reload"], ["enable", "--now", UNIT_NAME]):
        proc = subprocess.run([*ctl, *step], check=False)
        if proc.returncode != 0:
            print(f"`{' '.join([*ctl, *step])}` failed; the unit is at {path}", file=sys.stderr)
            return 1
    logs = "journalctl" + ("" if system else " --user") + " -u sidekick -f"
    print(f"enabled and started; logs: {logs} (and DATA_DIR/sidekick.log)")
    if not system:
        print("to keep it running after you log out: loginctl enable-linger $USER")
    return 0


def run_ops_command(command: str, args: argparse.Namespace, settings: Settings) -> int:
    # A BackupError is the CLI's one line and exit status 1, as any SidekickError.
    from bot.ops.backup import make_backup, verify
    from bot.ops.restore import restore

    if command == "service":
        return install_service(args.env_file, args.print)
    if command == "backup":
        archive = make_backup(settings, args.path)
        print(f"backup written: {archive}")
        if args.verify:
            checked = verify(archive)
            rows = sum(checked.tables.values())
            print(
                f"verified: integrity ok, {len(checked.tables)} table(s), {rows} row(s), "
                f"{checked.files} file(s)"
            )
        return 0
    checked = restore(settings, args.path, force=args.force)
    print(
        f"restored {args.path}: {sum(checked.tables.values())} row(s), "
        f"{checked.files} file(s) into {settings.data_dir}"
    )
    return 0


async def check_operations(app: App) -> list[CheckResult]:
    return operations_results(app.settings)


def operations_results(settings: Settings) -> list[CheckResult]:
    """Doctor: the .env's permissions (it holds the bot token) and the daily backups."""
    from bot.ops.backup import backup_status

    out = []
    env = env_path()
    if env.is_file():
        where, mode = env.resolve(), stat.S_IMODE(env.stat().st_mode)
        if mode & 0o077:
            said = f"{where} is readable by others (mode {mode:o}); it holds the token"
            out.append(CheckResult(".env", False, said, f"chmod 600 {where}"))
        else:
            out.append(CheckResult(".env", True, f"{where} readable by its owner only"))
    return [*out, backup_status(settings)]
