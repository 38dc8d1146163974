"""`sidekick status` and `sidekick logs`: what the running bot is doing, from another shell
(the run lock's holder, the database read only, the data folder)."""

from __future__ import annotations

import os
import shutil
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from bot.config import Settings
from bot.logs import RUN_LOG, Scrubber
from bot.ops.preflight import sqlite_file
from bot.ops.runlock import holder

FOLLOW_POLL_S = 0.5


def ago(then: datetime, now: datetime) -> str:
    s = int((now - then).total_seconds())
    if s < 90:
        return f"{s} s ago"
    if s < 5400:
        return f"{s // 60} min ago"
    if s < 2 * 86400:
        return f"{s // 3600} h {s % 3600 // 60} min ago"
    return f"{s // 86400} days ago"


def size(n: float) -> str:
    for unit in ("B", "KB", "MB"):
        if n < 1024:
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GB"


def folder_size(folder: Path) -> int:
    total = 0
    for path in folder.rglob("*"):
        try:
            if path.is_file():
                total += path.stat().st_size
        except OSError:
            continue
    return total


async def database_lines(settings: Settings, now: datetime) -> list[str]:
    from db.engine import create_engine, session_factory
    from db.repos.activity import activity
    from tools.memory.reembed import status_line
    from tools.reminders.repo import upcoming

    tz = settings.tz
    midnight = datetime.combine(now.astimezone(tz).date(), datetime.min.time(), tz)
    engine = create_engine(settings.db_url)
    try:
        async with session_factory(engine)() as s:
            act = await activity(s, midnight.astimezone(UTC))
            active, nxt = await upcoming(s)
        memory = await status_line(session_factory(engine))
    except Exception as exc:
        return [f"database:    cannot read it ({type(exc).__name__}): try `sidekick doctor`"]
    finally:
        await engine.dispose()
    last = (
        f"last answer {act.last_answer.astimezone(tz):%Y-%m-%d %H:%M} ({ago(act.last_answer, now)})"
        if act.last_answer
        else "no answer yet"
    )
    lines = [
        f"model:       {settings.llm_model} at {settings.llm_base_url}; {last}",
        f"messages:    {act.messages} today",
        f"deliveries:  {act.queued} waiting to be sent",
    ]
    if not active:
        lines.append("reminders:   none active")
    else:
        shown = "; ".join(f"{at.astimezone(tz):%Y-%m-%d %H:%M} {text[:40]!r}" for at, text in nxt)
        lines.append(f"reminders:   {active} active; next {shown or '(none scheduled)'}")
    return [*lines, *([memory] if memory else [])]


def backup_line(settings: Settings, now: datetime) -> str:
    from bot.ops.backup import archives, modified

    found = archives(settings)
    if not found:
        how = "BACKUP_KEEP=N makes one a day" if not settings.backup_keep else "none made yet"
        return f"last backup: none ({how}; `sidekick backup` makes one now)"
    newest = found[-1]
    when = modified(newest)
    return (
        f"last backup: {when.astimezone(settings.tz):%Y-%m-%d %H:%M} ({ago(when, now)}), "
        f"{newest.name}, {size(newest.stat().st_size)}"
    )


def no_database(settings: Settings) -> str | None:
    path = sqlite_file(settings)
    if path is not None and not path.is_file():
        return f"database:    none yet at {path} (the first start makes it)"
    return None


def run_line(settings: Settings, now: datetime) -> str:
    run = holder(settings.data_dir)
    if run is None:
        return "Sidekick:    not running (start it with `make run` or `sidekick run`)"
    if run.pid is None or run.since is None:
        return "Sidekick:    running (starting up)"
    if run.command != "run":
        return f"Sidekick:    not running; `sidekick {run.command}` is at work (pid {run.pid})"
    started = run.since.astimezone(settings.tz)
    up = ago(run.since, now).removesuffix(" ago")
    return f"Sidekick:    running since {started:%Y-%m-%d %H:%M} ({up}; pid {run.pid})"


def disk_line(settings: Settings) -> str:
    data = settings.data_dir
    if not data.is_dir():
        return f"disk:        no data folder yet ({data})"
    free = shutil.disk_usage(data).free
    return f"disk:        data folder {size(folder_size(data))} ({data}); {size(free)} free"


async def print_status(settings: Settings, now: datetime | None = None) -> int:
    # Here, not at the top: `sidekick logs` shares this module and needs neither (they
    # bring in the database layer).
    from bot.dashboard.probe import status_line

    now = now or datetime.now(UTC)
    missing = no_database(settings)
    lines = [
        run_line(settings, now),
        *([missing] if missing else await database_lines(settings, now)),
        backup_line(settings, now),
        disk_line(settings),
        await status_line(settings),
    ]
    print("\n".join(lines))
    return 0


def print_logs(settings: Settings, lines: int, follow: bool) -> int:
    """The end of DATA_DIR/sidekick.log, secrets masked (again: a line written before a
    secret was set is masked now too); `follow`: new lines as they come, across a rotation."""
    path = settings.data_dir / RUN_LOG
    scrub = Scrubber(settings.secrets()).scrub
    out, position, inode = sys.stdout, 0, -1
    if not path.is_file():
        print(f"sidekick: no log yet at {path} (`sidekick run` writes it)", file=sys.stderr)
        if not follow:
            return 1
    else:
        with path.open("rb") as raw:
            tail = raw.readlines()[-lines:] if lines > 0 else []
            position, inode = raw.tell(), os.fstat(raw.fileno()).st_ino
        out.writelines(scrub(line.decode("utf-8", "replace")) for line in tail)
        out.flush()
    try:
        while follow:
            time.sleep(FOLLOW_POLL_S)
            try:
                st = path.stat()
            except FileNotFoundError:
                continue
            if st.st_ino != inode or st.st_size < position:  # rotated: the new file
                position, inode = 0, st.st_ino
            if st.st_size == position:
                continue
            with path.open("rb") as raw:
                raw.seek(position)
                chunk = raw.read()
            complete = chunk[: chunk.rfind(b"\n") + 1]  # a line being written waits
            position += len(complete)
            out.write(scrub(complete.decode("utf-8", "replace")))
            out.flush()
    except KeyboardInterrupt:
        pass
    return 0
