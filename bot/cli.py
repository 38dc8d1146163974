"""The `sidekick` command: run, chat, migrate, doctor."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

from bot.config import Settings, load_settings, require
from bot.errors import ConfigError
from bot.logs import setup_logging


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="sidekick", description="Your self-hosted assistant.")
    sub = p.add_subparsers(dest="command")
    sub.add_parser("run", help="start the Telegram bot (the default)")
    sub.add_parser("chat", help="chat in the terminal, no Telegram needed")
    mig = sub.add_parser(
        "migrate", help="apply database migrations, or copy an install with --from/--to"
    )
    mig.add_argument("--from", dest="source", help="copy from this database URL (sqlite:///…)")
    mig.add_argument("--to", dest="target", help="into this empty one (postgresql://…)")
    sub.add_parser("doctor", help="check settings, database, model endpoint and Telegram")
    mem = sub.add_parser("memory", help="memory maintenance")
    mem.add_argument("action", choices=["reindex"])
    return p


async def _migrate(settings: Settings) -> None:
    from db.engine import create_engine
    from db.migrate import pending, upgrade

    engine = create_engine(settings.db_url)
    try:
        before = await pending(engine)
        await upgrade(engine)
        print(f"database {settings.db_url}: applied {len(before)} migration(s), up to date")
    finally:
        await engine.dispose()


async def _copy(source: str | None, target: str | None) -> int:
    from db.copy import CopyError, copy_database

    if not source or not target:
        raise ConfigError("migrate: give both --from URL and --to URL")
    try:
        counts = await copy_database(_sqlite_url(source), _sqlite_url(target))
    except CopyError as exc:
        print(f"sidekick: copy failed: {exc}", file=sys.stderr)
        return 1
    for c in counts:
        print(f"{c.table}: {c.target} row(s)")
    print("copy verified: every table has the same row count in both databases")
    return 0


def _sqlite_url(url: str) -> str:
    """sqlite:///path as the async driver's URL; other URLs as given."""
    return (
        "sqlite+aiosqlite://" + url.removeprefix("sqlite://")
        if url.startswith("sqlite://")
        else url
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    command = args.command or "run"
    try:
        settings = load_settings()
        setup_logging(settings.log_level, settings.secrets())
        if command == "run":
            require(settings, "telegram_bot_token", "llm_model")
            from bot.telegram.main import run_bot

            asyncio.run(run_bot(settings))
        elif command == "chat":
            from bot.terminal import run_chat

            asyncio.run(run_chat(settings))
        elif command == "migrate" and (args.source or args.target):
            return asyncio.run(_copy(args.source, args.target))
        elif command == "migrate":
            asyncio.run(_migrate(settings))
        elif command == "doctor":
            from bot.doctor import run_doctor

            return asyncio.run(run_doctor(settings))
        elif command == "memory":
            from bot.memory_cli import reindex

            asyncio.run(reindex(settings))
    except ConfigError as exc:
        print(f"sidekick: configuration error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
