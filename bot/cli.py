"""The `sidekick` command: setup, run, chat, status, logs, migrate, doctor, usage, memory.

Exit status: 0 done, 1 a failure at run time (e.g. Telegram unreachable), 2 a bad setting
(one line per setting at fault, no traceback), 130 interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING

from bot import heap
from bot.errors import ConfigError, SidekickError
from bot.logs import RUN_LOG, setup_logging
from bot.ops.preflight import where_am_i

if TYPE_CHECKING:
    # The settings are read after the arguments: `--version` and `--help` need neither
    # them nor the features they are built from.
    from bot.config import Settings

CHAT_LOG = "chat.log"  # in DATA_DIR
ENV_HELP = (
    "Settings come from the environment and .env (in SIDEKICK_HOME if set, else the current "
    "directory); see README.md for every variable."
)


def _version() -> str:
    try:
        return version("sidekick")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "unknown"


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="sidekick", description="Your self-hosted assistant in Telegram.", epilog=ENV_HELP
    )
    p.add_argument("--version", action="version", version=f"sidekick {_version()}")
    p.add_argument(
        "--env-file",
        type=Path,
        metavar="PATH",
        help="read settings from this file instead of .env",
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    def command(name: str, summary: str, description: str) -> argparse.ArgumentParser:
        return sub.add_parser(name, help=summary, description=description, epilog=ENV_HELP)

    command(
        "run",
        "start the Telegram bot (the default)",
        "Start the Telegram bot: long polling, or a webhook when WEBHOOK_URL is set. "
        "Needs TELEGRAM_BOT_TOKEN and LLM_MODEL. Stops cleanly on Ctrl-C or SIGTERM.",
    )
    chat = command(
        "chat",
        "chat in the terminal, no Telegram needed",
        "Chat with the same agent in the terminal. Commands: /help, /new, /sessions, "
        "/memory, /tools, /quit. By default you are a local user of your own; "
        "--as links the chat to your Telegram account (same history, sessions, memories).",
    )
    chat.add_argument(
        "--as",
        dest="as_user",
        type=int,
        metavar="TELEGRAM_ID",
        help="chat as this Telegram user (your numeric id: the bot tells you it)",
    )
    mig = command(
        "migrate",
        "apply database migrations, or copy an install with --from/--to",
        "Create the database or bring it up to date (run and chat also do this at start). "
        "With --from and --to, copy a whole install (e.g. SQLite to PostgreSQL) into an "
        "empty database and verify the row counts.",
    )
    mig.add_argument("--from", dest="source", help="copy from this database URL (sqlite:///…)")
    mig.add_argument("--to", dest="target", help="into this empty one (postgresql://…)")
    doc = command(
        "doctor",
        "check settings, database, model endpoint and Telegram",
        "Check every part and print ok / FAIL with the fix for each failure. "
        "Exit status 1 when anything failed.",
    )
    doc.add_argument(
        "--fix",
        action="store_true",
        help="first fix what needs no decision: file modes, missing folders, migrations, "
        "bubblewrap",
    )
    use = command(
        "usage",
        "model usage and cost: today, this month, by model",
        "Tokens and cost of every model call: today, this month, by model and by purpose, "
        "with the budget state.",
    )
    use.add_argument("--user", type=int, help="one user's usage (Telegram id); default: all")
    mem = command("memory", "memory maintenance", "Memory maintenance.")
    mem.add_argument(
        "action", choices=["reindex"], help="reindex: re-embed every memory with the embedder"
    )
    bak = command(
        "backup",
        "back up the database and data folder into one archive",
        "Copy the database (SQLite with its online backup API, safe while the bot runs; "
        "PostgreSQL with pg_dump) and the data folder's files into one .tar.gz, by default "
        "in DATA_DIR/backups. BACKUP_KEEP=N makes one a day and keeps N.",
    )
    bak.add_argument("path", nargs="?", type=Path, help="archive file or folder to write to")
    bak.add_argument(
        "--verify", action="store_true", help="open the copy: integrity check and row counts"
    )
    res = command(
        "restore",
        "restore a backup archive into DATA_DIR and the database",
        "Verify the archive, then put its database and files back. Refuses when the target "
        "already holds data unless --force (stop the bot first).",
    )
    res.add_argument("path", type=Path, help="archive made by `sidekick backup`")
    res.add_argument("--force", action="store_true", help="replace the data that is there")
    setup = command(
        "setup",
        "set up or change the bot token, model, owner and search, checking each",
        "Ask for the settings a first start needs, check each at once (the token with "
        "Telegram, the model endpoint by listing its models, search with one query) and write "
        "them to .env (mode 600), keeping its other lines. Run again to change one thing.",
    )
    setup.add_argument(
        "--if-needed",
        action="store_true",
        help="only on a terminal, and only when .env has no bot token or model yet",
    )
    command(
        "status",
        "is the bot running, and what it did today",
        "Whether the bot runs (and since when), the model and its last answer, messages "
        "today, deliveries waiting, the next reminders, the last backup and disk use.",
    )
    logs = command(
        "logs",
        "show the bot's log (DATA_DIR/sidekick.log)",
        "Print the end of the log `sidekick run` writes (secrets masked); -f follows it.",
    )
    logs.add_argument("-f", "--follow", action="store_true", help="keep printing new lines")
    logs.add_argument("-n", "--lines", type=int, default=50, help="how many lines (default 50)")
    svc = command(
        "service",
        "install a systemd service that keeps the bot running",
        "Write a systemd unit that starts `sidekick run` at boot (a user unit, or a system "
        "unit as root), restarts it after a crash but not after a configuration error "
        "(exit status 2), and enable it.",
    )
    svc.add_argument("action", choices=["install"], help="install: write and enable the unit")
    svc.add_argument("--print", action="store_true", help="only print the unit file")
    return p


async def _migrate(settings: Settings) -> None:
    from bot.app import migrated
    from bot.features import FEATURES
    from db.engine import create_engine
    from db.migrate import pending

    engine = create_engine(settings.db_url)
    try:
        before = await pending(engine)
        await migrated(engine, FEATURES)  # "up to date" only when the schema says so too
        print(f"database {settings.db_url}: applied {len(before)} migration(s), up to date")
    finally:
        await engine.dispose()


def _run(command: str, args: argparse.Namespace, settings: Settings) -> int:
    if command in ("run", "chat"):  # long-lived: before any thread starts
        heap.one_arena()
    if command == "run":
        from bot.ops.runlock import START_WAIT_S, hold
        from bot.telegram.main import run_bot

        # Before the database is opened: a second bot in the same folder stops in one line.
        shared = shares_data_dir(settings)
        with hold(settings.data_dir, datetime.now(UTC), "run", shared=shared, wait_s=START_WAIT_S):
            asyncio.run(run_bot(settings))
    elif command == "chat":
        from bot.terminal.chat import run_chat

        asyncio.run(run_chat(settings, as_user=args.as_user))
    elif command == "migrate" and (args.source or args.target):
        return asyncio.run(_copy(args.source, args.target))
    elif command == "migrate":
        asyncio.run(_migrate(settings))
    elif command == "doctor":
        from bot.ops.doctor import run_doctor

        return asyncio.run(run_doctor(settings, fix=args.fix))
    elif command in ("status", "logs"):
        from bot.ops.status import print_logs, print_status

        if command == "logs":
            return print_logs(settings, args.lines, args.follow)
        return asyncio.run(print_status(settings))
    elif command == "usage":
        from bot.usage.cli import print_usage

        return asyncio.run(print_usage(settings, args.user))
    elif command in ("backup", "restore", "service"):
        from bot.ops.cli import run_ops_command

        return run_ops_command(command, args, settings)
    elif command == "memory":
        asyncio.run(memory_reindex(settings))
    return 0


def shares_data_dir(settings: Settings) -> bool:
    """Webhook workers on PostgreSQL may share a data folder (docs/scaling.md); a long poller
    or a SQLite bot is alone in it."""
    return bool(settings.webhook_url) and not settings.db_url.startswith("sqlite")


async def memory_reindex(settings: Settings) -> None:
    """`sidekick memory reindex`: re-embed every memory with the configured embedder."""
    from bot.app import build_app
    from tools.memory.commands import reindex_command
    from tools.memory.store import MEMORY

    app = await build_app(settings)
    try:
        await reindex_command(app.maybe(MEMORY))
    finally:
        await app.close()


async def _copy(source: str | None, target: str | None) -> int:
    from bot.features import metadata
    from db.copy import CopyError, copy_database
    from tools.memory.copy import INDEX as MEMORY_INDEX

    if not source or not target:
        raise ConfigError("migrate: give both --from URL and --to URL")
    try:
        counts = await copy_database(
            _sqlite_url(source), _sqlite_url(target), metadata(), (MEMORY_INDEX,)
        )
    except CopyError as exc:
        print(f"sidekick: copy failed: {exc}", file=sys.stderr)
        return 1
    for c in counts:
        print(f"{c.table}: {c.target} row(s)")
    print("copy verified: every table has the same row count in both databases")
    return 0


def _sqlite_url(url: str) -> str:
    """sqlite:///path as the async driver's URL; other URLs as given."""
    return re.sub(r"^sqlite://", "sqlite+aiosqlite://", url)


# What each command needs set before it starts.
REQUIRED = {"run": ("telegram_bot_token", "llm_model"), "chat": ("llm_model",)}


def configure(args: argparse.Namespace, command: str) -> Settings:
    """Settings, or one ConfigError listing every problem found (bad values, missing ones, the
    file system's), after one warning line per misspelled variable name and per former name
    read as its replacement."""
    from bot.config import missing, settings_and_errors, unknown_names
    from bot.ops.preflight import preflight, tighten

    for line in unknown_names(args.env_file):
        print(f"sidekick: warning: {line}", file=sys.stderr)
    settings, errors = settings_and_errors(env_file=args.env_file)
    for line in settings.renamed:
        print(f"sidekick: warning: {line}", file=sys.stderr)
    named = {line.split(":")[0] for line in errors}  # a bad value is not also "not set"
    errors += [
        m for m in missing(settings, *REQUIRED.get(command, ())) if m.split()[0] not in named
    ]
    errors += preflight(settings)  # before anything is opened: nothing is left half-open
    if errors:
        raise ConfigError("\n".join(errors))
    tighten(settings)  # only a start that goes on touches the database's files
    return settings


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    command = args.command or "run"
    if command == "setup":  # before the settings are read: they may not be usable yet
        from bot.config import env_path
        from bot.ops.setup_wizard import run_setup

        return run_setup(env_path(args.env_file), if_needed=args.if_needed)
    try:
        settings = configure(args, command)
        where_am_i(args.env_file, command, settings)
        # The terminal chat keeps its screen for the conversation: its log goes to a file.
        log_file = settings.data_dir / CHAT_LOG if command == "chat" else None
        rotating = settings.data_dir / RUN_LOG if command == "run" else None
        if command in ("status", "logs"):  # their output is the screen: no log lines on it
            settings.log_level = "WARNING"
        setup_logging(settings.log_level, settings.secrets(), file=log_file, rotating=rotating)
        return _run(command, args, settings)
    except ConfigError as exc:
        for line in str(exc).splitlines():
            print(f"sidekick: configuration error: {line}", file=sys.stderr)
        return 2
    except SidekickError as exc:
        print(f"sidekick: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
