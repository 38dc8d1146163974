"""`sidekick chat`: the same agent in the terminal. Lines are read in a daemon thread, so
Ctrl-C leaves at once instead of waiting for a read; the log goes to DATA_DIR/chat.log."""

from __future__ import annotations

import asyncio
import contextlib
import getpass
import os
import sys
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from bot.agent.runner import Events, Incoming
from bot.app import App, build_app
from bot.approvals.gate import APPROVALS, Choice, Question
from bot.config import Settings, require
from bot.errors import public_text
from bot.shown import shown
from bot.surrogates import scrub
from bot.terminal.commands import Who, run_command, saved
from db.repos.core import Recipient
from scheduler.setup import Scheduler
from tools.hooks import File

PROMPT = "you> "
ASK = "Allow? y = once, a = always for this tool, n = no: "
CHOICES: dict[str, Choice] = {"y": "once", "yes": "once", "a": "always", "always": "always"}
HISTORY_FILE = "chat_history"  # in DATA_DIR
HISTORY_LINES = 1000


@contextlib.contextmanager
def line_editing(history: Path) -> Iterator[None]:
    """readline for input(), history kept in a file; the terminal's modes restored at the end
    even when Ctrl-C cut a read short."""
    saved = None
    try:
        import readline
        import termios

        if sys.stdin.isatty():
            saved = termios.tcgetattr(sys.stdin.fileno())
        readline.set_history_length(HISTORY_LINES)
        with contextlib.suppress(OSError):
            readline.read_history_file(history)
    except ImportError:  # no readline on this platform: plain input()
        readline = None  # type: ignore[assignment]
    try:
        yield
    finally:
        if readline is not None:
            with contextlib.suppress(OSError):
                readline.write_history_file(history)
        if saved is not None:
            termios.tcsetattr(sys.stdin.fileno(), termios.TCSADRAIN, saved)


class LineSource:
    """Lines typed in a terminal (input() with readline), or piped in (read from the file
    descriptor directly: a thread blocked inside sys.stdin's buffer would hold its lock, and
    the interpreter aborts at exit when a daemon thread holds it)."""

    def __init__(self) -> None:
        self.tty = sys.stdin.isatty()
        self.pending = b""
        # A read its reader gave up on (an approval question that timed out): the next
        # reader takes its line, so two threads never read at once and no line is lost.
        self.abandoned: asyncio.Future[str | None] | None = None

    def read(self, prompt: str) -> str | None:
        if self.tty:
            try:
                return scrub(input(prompt))  # undecodable bytes come as surrogates
            except (EOFError, OSError, ValueError):
                return None
        sys.stdout.write(prompt)
        sys.stdout.flush()
        while b"\n" not in self.pending:
            chunk = os.read(sys.stdin.fileno(), 4096)
            if not chunk:
                rest, self.pending = self.pending, b""
                return rest.decode("utf-8", "replace") if rest else None
            self.pending += chunk
        line, _, self.pending = self.pending.partition(b"\n")
        return line.decode("utf-8", "replace")


async def read_line(source: LineSource, prompt: str) -> str | None:
    """One line (None at end of input), read in a daemon thread: a read that never returns
    must not keep the process alive after Ctrl-C."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[str | None] | None = source.abandoned
    source.abandoned = None
    if future is not None:
        sys.stdout.write(prompt)
        sys.stdout.flush()
        return await _take(source, future)
    future = loop.create_future()

    def deliver(value: str | None) -> None:
        if not future.done():
            future.set_result(value)

    def work() -> None:
        try:
            value = source.read(prompt)
        except OSError:
            value = None
        with contextlib.suppress(RuntimeError):  # the loop may be gone already
            loop.call_soon_threadsafe(deliver, value)

    threading.Thread(target=work, name="chat-input", daemon=True).start()
    return await _take(source, future)


async def _take(source: LineSource, future: asyncio.Future[str | None]) -> str | None:
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:  # the thread still reads: its line goes to the next reader
        if not future.done():
            source.abandoned = future
        raise


class TerminalAsker:
    """Approvals in the terminal: y (once), a (always), anything else no. A question during an
    answer reads the next line itself; one from a scheduled task while the prompt waits
    takes the line the prompt reads (`take`), so two reads never race for stdin."""

    def __init__(self, source: LineSource) -> None:
        self.source = source
        self.idle = False  # the prompt is waiting for a line
        self.pending: asyncio.Future[str] | None = None
        self.lock = asyncio.Lock()

    async def __call__(self, q: Question) -> Choice:
        async with self.lock:
            sys.stdout.write(f"\n🔐 May I do this?\n{q.action}\n({q.effects})\n")
            try:
                async with asyncio.timeout(q.timeout_s):
                    if not self.idle:
                        line = await read_line(self.source, ASK)
                    else:
                        self.pending = asyncio.get_running_loop().create_future()
                        sys.stdout.write(ASK)
                        sys.stdout.flush()
                        line = await self.pending
            except (asyncio.CancelledError, TimeoutError):
                sys.stdout.write("\n(No answer in time: not run.)\n")
                sys.stdout.flush()
                raise
            finally:
                self.pending = None
        return CHOICES.get((line or "").strip().lower(), "deny")

    def take(self, line: str) -> bool:
        """Give the prompt's line to a waiting question; False when none waits."""
        if self.pending is None or self.pending.done():
            return False
        self.pending.set_result(line)
        return True


class Status:
    """The one line shown between Enter and the answer's first text ("thinking…", then the
    tool being run): a model on a CPU may take a minute to say anything. Only on a
    terminal, where it can be erased; piped output gets the answer alone."""

    def __init__(self, live: bool) -> None:
        self.live = live
        self.shown = False

    def show(self, text: str) -> None:
        if self.live:
            sys.stdout.write(f"\r{text}\033[K")
            sys.stdout.flush()
            self.shown = True

    def clear(self) -> None:
        if self.shown:
            sys.stdout.write("\r\033[K")
            self.shown = False


@dataclass
class TerminalDelivery:
    """The local user's reminders printed into the chat (the id a local counter); files saved
    in `folder` and their paths printed."""

    folder: Path
    sent: int = 0

    async def __call__(
        self,
        recipient: Recipient,
        text: str,
        markdown: bool,
        files: Sequence[File] = (),
        buttons: Sequence[tuple[str, str]] = (),
    ) -> int:
        # The terminal has no buttons: they are named, for Telegram.
        if buttons:
            text += "\n(" + " · ".join(label for label, _ in buttons) + ": buttons in Telegram)"
        text += "".join(saved(self.folder, name, content) for name, content in files)
        sys.stdout.write(f"\n{shown(text)}\n{PROMPT}")
        sys.stdout.flush()
        self.sent += 1
        return self.sent


async def answer(app: App, who: Who, line: str) -> None:
    printed = 0
    status = Status(sys.stdout.isatty())
    status.show("thinking…")

    async def on_text(text: str) -> None:
        nonlocal printed
        status.clear()
        sys.stdout.write(shown(text[printed:]))
        sys.stdout.flush()
        printed = len(text)

    async def on_tools(names: list[str]) -> None:
        nonlocal printed
        status.clear()
        sys.stdout.write(f"\n[running {', '.join(names)}]\n")
        printed = 0
        status.show(f"running {', '.join(names)}, then thinking…")

    async def on_wait(notice: str) -> None:
        nonlocal printed
        status.clear()
        sys.stdout.write(f"\n[{notice}]\n")
        printed = 0
        status.show("waiting for the model…")

    try:
        reply = await app.agent.handle(
            Incoming(line, telegram_user_id=who.telegram_user_id, user_name=who.name),
            Events(on_text=on_text, on_tools=on_tools, on_wait=on_wait),
        )
        status.clear()
        # Streamed text is on screen already; the notes under it (usage) are not.
        sys.stdout.write(shown(reply.text if printed == 0 else reply.notes))
        sys.stdout.write("\n")
    except Exception as exc:
        status.clear()
        print(f"\n{public_text(exc)}")


async def run_chat(settings: Settings, as_user: int | None = None) -> None:
    require(settings, "llm_model")
    # Linked to a Telegram account the user keeps their Telegram name; else the login name.
    who = Who(as_user, "" if as_user is not None else getpass.getuser())
    app = await build_app(settings)
    app.warm_up()  # the embedding model and tokenizer load while the user types
    # Reminders of the local user arrive here while the chat runs (missed ones at start);
    # a user linked with --as gets theirs in Telegram, from the bot.
    jobs = (
        await app.start_features(TerminalDelivery(settings.data_dir / "files"), local=True)
        if as_user is None
        else []
    )
    scheduler = Scheduler(jobs) if jobs else None
    source = LineSource()
    asker = TerminalAsker(source)  # before the first tick: a task it starts may ask
    if app.has(APPROVALS):
        app.part(APPROVALS).asker = asker
    try:
        if scheduler is not None:
            # What came due while the chat was closed, before the prompt.
            await asyncio.gather(*(run() for *_, run in jobs))
            scheduler.start()
        with line_editing(settings.data_dir / HISTORY_FILE):
            linked = f" as Telegram user {as_user}" if as_user is not None else ""
            print(
                f"Sidekick in the terminal{linked}. /help lists the commands, "
                "/quit or Ctrl-D leaves.",
                flush=True,
            )
            while True:
                print(flush=True)
                async with asker.lock:  # a question reading its answer goes first
                    asker.idle = True
                line = await read_line(source, PROMPT)
                asker.idle = False
                if line is not None and asker.take(line):
                    continue
                if line is None or line.strip() in {"/quit", "/exit"}:
                    break
                line = line.strip()
                if not line:
                    continue
                try:
                    local = await run_command(app, who, line)
                except Exception as exc:
                    local = public_text(exc)
                if local is not None:
                    print(shown(local), flush=True)
                else:
                    await answer(app, who, line)
    finally:
        if scheduler is not None:
            await scheduler.stop()
        await app.close()
