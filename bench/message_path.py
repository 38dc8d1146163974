"""How far one message travels through the code, and the shape of the tree around it.

The figures issue 33 asks for, measured on the tree this script runs from:

1. Files entered by one message, traced at run time through the real app. The assembled app
   (bot.app.build_app + bot.telegram.dispatcher.build_runtime, as `sidekick run` and the e2e
   tests build it) polls a fake Telegram and talks to the fake model (tests/fakes) on
   loopback. A profile hook (sys.setprofile on the loop's thread, threading.setprofile for
   every thread the app starts: aiosqlite's, to_thread's) records the code file of every
   function call from the moment the update is pushed until the reply was sent and the
   handler has finished; the distinct files under bot/ db/ tools/ scheduler/ are counted.
   Calls made by the harness itself (tests/, bench/: the fake model reads the prompt with a
   bot helper) are left out. Three scenarios, each traced on its second message of its kind
   so one-time imports and first-message set-up are not counted:
     plain         a plain message from a user with no memories (auto-recall finds nothing)
     recall        a plain message from a user with memories (stored through the memory
                   tool first), so auto-recall runs
     tool call     a message the model answers with one tool call (memory recall), then text
2. Files a reader follows for that path: the project files on the call stack when the model
   is called (the hook sees httpx's AsyncClient.send of a /chat/completions request) and
   when the turn writes to the database (INSERT/UPDATE/DELETE, SQLAlchemy's
   before_cursor_execute; the stack is followed out of SQLAlchemy's greenlet into the
   awaiting coroutines). Writes to temp.* tables are a query's scratch space (memory
   recall's), not what the turn records: --list shows them, they are not counted. A stack
   ends at its asyncio task: code that hands work to another task shows from that task's
   start.
3. Python lines per top-level folder (git-tracked *.py files; this script not counted, so
   two trees compare alike), import circles inside bot db tools scheduler (the import graph
   from `ast`, strongly connected components of more than one module; once with every import,
   once with only those run when a module is imported: no function-level imports, none under
   `if TYPE_CHECKING`), the settings count (bot.config.Settings) and README.md's lines.

Usage: python bench/message_path.py [--list]   (run from the tree's root)
--list prints the files of each figure; a file's number there counts the hook's call events
(a coroutine's every resumption is one), so it compares trees only roughly.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import logging
import os
import re
import subprocess
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
from sqlalchemy import event  # noqa: E402
from sqlalchemy.engine import Engine  # noqa: E402

from bot.app import build_app  # noqa: E402
from bot.config import Settings, load_settings  # noqa: E402
from bot.telegram.dispatcher import Runtime, build_runtime  # noqa: E402
from tests.fakes.openai_server import Calls, FakeOpenAI, Text, Turn  # noqa: E402
from tests.fakes.telegram_server import FakeTelegram, message_update  # noqa: E402

try:
    import greenlet
except ImportError:  # SQLAlchemy's asyncio needs it; without it stacks end at the greenlet
    greenlet = None

PROJECT = ("bot", "db", "tools", "scheduler")
FOLDERS = ("bot", "db", "tools", "scheduler", "migrations", "tests", "bench")
WAIT_S = 120.0  # bounds a hang only; every wait is on a condition
WRITE = re.compile(r"^\s*(INSERT|UPDATE|DELETE|REPLACE)\b", re.IGNORECASE)
SCRATCH = re.compile(r"^\s*(INSERT\s+INTO|DELETE\s+FROM|UPDATE)\s+temp\.", re.IGNORECASE)
THIS = Path(__file__).resolve()


def frames(frame: FrameType | None) -> Iterator[FrameType]:
    """The frame and its callers, followed out of greenlets into the frame that switched in
    (SQLAlchemy's async layer runs its sync core in a greenlet), up to the asyncio task's
    start (Handle._run; beyond it are the loop and whoever started it)."""
    g = greenlet.getcurrent() if greenlet is not None else None
    while True:
        while frame is not None:
            code = frame.f_code
            if code.co_name == "_run" and code.co_filename.endswith(f"asyncio{os.sep}events.py"):
                return
            yield frame
            frame = frame.f_back
        g = g.parent if g is not None else None
        if g is None:
            return
        frame = g.gr_frame


@dataclass
class Trace:
    entered: Counter[str] = field(default_factory=Counter)
    at_model: set[str] = field(default_factory=set)
    at_write: set[str] = field(default_factory=set)
    requests: list[httpx.Request] = field(default_factory=list)  # to the model
    writes: list[str] = field(default_factory=list)
    scratch: list[str] = field(default_factory=list)  # writes to temp tables

    @property
    def reader(self) -> set[str]:
        return self.at_model | self.at_write


class Tracer:
    """The profile hook and the database listener; both record only between start and stop."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.project = tuple(f"{root / d}{os.sep}" for d in PROJECT)
        self.harness = tuple(f"{root / d}{os.sep}" for d in ("tests", "bench"))
        self.httpx_client = str(Path(httpx.__file__).parent / "_client.py")
        self.on = False
        self.trace = Trace()
        self._kind: dict[str, int] = {}  # code file -> 0 elsewhere, 1 project, 2 httpx

    def _classify(self, filename: str) -> int:
        kind = 1 if filename.startswith(self.project) else 0
        if filename == self.httpx_client:
            kind = 2
        self._kind[filename] = kind
        return kind

    def rel(self, filename: str) -> str:
        return os.path.relpath(filename, self.root)

    def project_files(self, frame: FrameType | None) -> set[str]:
        return {
            self.rel(f.f_code.co_filename)
            for f in frames(frame)
            if f.f_code.co_filename.startswith(self.project)
        }

    def from_harness(self, frame: FrameType) -> bool:
        return any(f.f_code.co_filename.startswith(self.harness) for f in frames(frame))

    def hook(self, frame: FrameType, event_name: str, arg: Any) -> None:
        if not self.on or event_name != "call":
            return
        filename = frame.f_code.co_filename
        kind = self._kind.get(filename)
        if kind is None:
            kind = self._classify(filename)
        if kind == 1:
            if not self.from_harness(frame):
                self.trace.entered[self.rel(filename)] += 1
        elif kind == 2 and frame.f_code.co_name == "send":
            request = frame.f_locals.get("request")
            if isinstance(request, httpx.Request) and request.url.path.endswith(
                "/chat/completions"
            ):
                # A coroutine's every resumption is a "call" event: count each request once.
                if not any(r is request for r in self.trace.requests):
                    self.trace.requests.append(request)
                self.trace.at_model |= self.project_files(frame)

    def on_cursor(self, conn: Any, cursor: Any, statement: str, *rest: Any) -> None:
        if not self.on or not WRITE.match(statement):
            return
        what = " ".join(statement.split()[:3])
        if SCRATCH.match(statement):  # a query's scratch table, not what the turn records
            self.trace.scratch.append(what)
            return
        self.trace.writes.append(what)
        self.trace.at_write |= self.project_files(sys._getframe(1))

    def start(self) -> None:
        self.trace = Trace()
        self.on = True
        sys.setprofile(self.hook)

    def stop(self) -> Trace:
        sys.setprofile(None)
        self.on = False
        return self.trace


class Harness:
    def __init__(self, tracer: Tracer, tg: FakeTelegram, llm: FakeOpenAI, rt: Runtime) -> None:
        self.tracer = tracer
        self.tg = tg
        self.llm = llm
        self.rt = rt
        self.message_id = 0

    async def idle(self) -> None:
        """Every pushed update fetched and its handler finished."""
        await self.tg.wait_for(self.tg.all_confirmed, WAIT_S)
        await asyncio.sleep(0)  # the newest handler task registers itself
        tasks = set(self.rt.inflight.tasks)
        if tasks:
            await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), WAIT_S)
        await asyncio.wait_for(self.rt.inflight.wait_idle(), WAIT_S)

    async def message(self, user: int, text: str, *turns: Turn, answer: str,
                      traced: bool = False) -> Trace | None:  # fmt: skip
        """Send `text` as `user`; the model plays `turns`, the last answering `answer`.
        Returns once the answer was sent and the handler is done."""
        await self.idle()
        self.llm.add(*turns)
        self.message_id += 1
        sent = len(self.tg.sent_to(user))
        update = message_update(user, text, message_id=self.message_id)
        if traced:
            self.tracer.start()
        try:
            await self.tg.push(update)
            await self.tg.wait_for(
                lambda: any(m.text == answer for m in self.tg.sent_to(user)[sent:]), WAIT_S
            )
            await self.idle()
        finally:
            trace = self.tracer.stop() if traced else None
        return trace


FACTS = ("Lives in Porto", "Is allergic to penicillin", "Plays chess on Sundays")


async def traced_scenarios() -> dict[str, Trace]:
    tracer = Tracer(ROOT)
    # Threads the app starts from now on (aiosqlite's connections, to_thread's pool) carry
    # the hook; it does nothing until a trace starts.
    threading.setprofile(tracer.hook)
    event.listen(Engine, "before_cursor_execute", tracer.on_cursor)
    tg = await FakeTelegram().start()
    llm = await FakeOpenAI().start()
    users = {"warm": 1001, "plain": 1002, "recall": 1003}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            settings = load_settings(
                data_dir=Path(tmp),
                telegram_bot_token=tg.token,
                telegram_api_url=tg.base_url,
                allowed_user_ids=",".join(map(str, users.values())),
                llm_base_url=llm.base_url,
                llm_api_key="sk-bench",
                llm_model="fake-model",
            )
            app = await build_app(settings)
            rt = build_runtime(app)
            poll = asyncio.create_task(rt.poll(polling_timeout=10))
            try:
                await tg.wait_for(
                    lambda: any(c.method == "setMyCommands" for c in tg.calls), WAIT_S
                )
                h = Harness(tracer, tg, llm, rt)
                await h.message(users["warm"], "hello", Text("hi there"), answer="hi there")
                if app.warming is not None:  # the embedding model and token counter loaded
                    await app.warming
                return await _scenarios(h, users)
            finally:
                await rt.shutdown(10.0)
                await asyncio.gather(poll, return_exceptions=True)
    finally:
        threading.setprofile(None)
        event.remove(Engine, "before_cursor_execute", tracer.on_cursor)
        await tg.stop()
        await llm.stop()


async def _scenarios(h: Harness, users: dict[str, int]) -> dict[str, Trace]:
    traces: dict[str, Trace] = {}
    plain = users["plain"]
    await h.message(plain, "good morning", Text("morning!"), answer="morning!")
    traces["plain"] = await _traced(
        h, plain, "how are you?", Text("fine, thanks"), answer="fine, thanks"
    )

    recall = users["recall"]
    for fact in FACTS:
        store = {"action": "store", "layer": "long", "content": fact, "category": "fact"}
        await h.message(recall, f"remember: {fact}", Calls([("memory", store)]), Text("noted"),
                        answer="noted")  # fmt: skip
    await h.message(recall, "good morning", Text("morning!"), answer="morning!")
    traces["recall"] = await _traced(
        h, recall, "what should I eat in Porto?", Text("bacalhau"), answer="bacalhau"
    )

    def recall_call(query: str) -> Turn:
        return Calls([("memory", {"action": "recall", "query": query})])

    await h.message(recall, "where do I live?", recall_call("home town"), Text("Porto"),
                    answer="Porto")  # fmt: skip
    traces["tool call"] = await _traced(
        h, recall, "which antibiotics should I avoid?", recall_call("medicine allergies"),
        Text("penicillin"), answer="penicillin",
    )  # fmt: skip
    return traces


async def _traced(h: Harness, user: int, text: str, *turns: Turn, answer: str) -> Trace:
    trace = await h.message(user, text, *turns, answer=answer, traced=True)
    assert trace is not None
    return trace


# ---- the tree ----------------------------------------------------------------------------


def tracked_py(folder: str) -> list[Path]:
    """The folder's git-tracked *.py files (every *.py file outside a git checkout)."""
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), "ls-files", "-z", "--", folder],
            capture_output=True, check=True, text=True,
        ).stdout  # fmt: skip
        paths = [ROOT / p for p in out.split("\0") if p.endswith(".py")]
    except (OSError, subprocess.CalledProcessError):
        paths = [p for p in (ROOT / folder).rglob("*.py") if "__pycache__" not in p.parts]
    return [p for p in paths if p.resolve() != THIS and p.is_file()]


def line_count(path: Path) -> int:
    with path.open("rb") as f:
        return sum(1 for _ in f)


def modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for top in PROJECT:
        for path in tracked_py(top):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports(tree: ast.Module) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement, and whether it runs when the module is imported (module
    level, not in a function, not under `if TYPE_CHECKING`)."""

    def walk(node: ast.AST, at_import: bool) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                yield child, at_import
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                yield from walk(child, False)
            elif isinstance(child, ast.If) and _is_type_checking(child.test):
                for stmt in child.body:
                    yield from walk(ast.Module(body=[stmt], type_ignores=[]), False)
                for stmt in child.orelse:
                    yield from walk(ast.Module(body=[stmt], type_ignores=[]), at_import)
            else:
                yield from walk(child, at_import)

    yield from walk(tree, True)


def import_graph(mods: dict[str, Path]) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(every import, imports run at import time): module -> project modules it imports."""

    def resolve(name: str) -> str | None:
        while name:
            if name in mods:
                return name
            name = name.rpartition(".")[0]
        return None

    every: dict[str, set[str]] = {m: set() for m in mods}
    at_import: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        is_package = path.name == "__init__.py"
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node, runs in imports(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                if node.level:
                    base = mod.split(".") if is_package else mod.split(".")[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    prefix = ".".join([*base, node.module] if node.module else base)
                else:
                    prefix = node.module or ""
                targets = [f"{prefix}.{a.name}" for a in node.names]
            for target in targets:
                hit = resolve(target)
                if hit is not None and hit != mod:
                    every[mod].add(hit)
                    if runs:
                        at_import[mod].add(hit)
    return every, at_import


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found, key=lambda c: (-len(c), c))


# ---- report ------------------------------------------------------------------------------


def by_folder(files: set[str] | Counter[str]) -> str:
    counts = Counter(Path(f).parts[0] for f in files)
    return " ".join(f"{d}/ {counts[d]}" for d in PROJECT if counts[d])


def report_traces(traces: dict[str, Trace], listing: bool) -> None:
    print("1-2. one message through the assembled app (fake Telegram + fake model, loopback)")
    print(f"  {'scenario':<10} {'files entered':>13}  {'reader path':>11}  "
          f"{'at model call':>13}  {'at db writes':>12}  model calls  db writes")  # fmt: skip
    for name, t in traces.items():
        print(
            f"  {name:<10} {len(t.entered):>13}  {len(t.reader):>11}  {len(t.at_model):>13}  "
            f"{len(t.at_write):>12}  {len(t.requests):>11}  {len(t.writes):>9}"
        )
    for name, t in traces.items():
        print(f"  {name}: entered {by_folder(t.entered)}; reader path {by_folder(t.reader)}")
    if not listing:
        return
    for name, t in traces.items():
        print(f"\n  [{name}] files entered (call events):")
        for f in sorted(t.entered):
            marks = ("M" if f in t.at_model else " ") + ("W" if f in t.at_write else " ")
            print(f"    {marks} {f}  ({t.entered[f]})")
        print(f"  [{name}] reader path (M: on the stack at the model call, W: at a db write):")
        for f in sorted(t.reader):
            print(f"    {f}")
        print(f"  [{name}] db writes: {', '.join(t.writes) or '-'}")
        if t.scratch:
            print(f"  [{name}] not counted, writes to temp tables: {', '.join(t.scratch)}")


def report_tree(listing: bool) -> None:
    print("\n3. the tree")
    print("  python lines per top-level folder (git-tracked *.py):")
    total = 0
    for folder in FOLDERS:
        paths = tracked_py(folder)
        lines = sum(line_count(p) for p in paths)
        total += lines
        print(f"    {folder + '/':<12} {lines:>7} lines in {len(paths):>4} files")
    print(f"    {'all':<12} {total:>7}")
    mods = modules()
    every, at_import = import_graph(mods)
    for label, graph in (("every import", every), ("imports run at import time", at_import)):
        found = circles(graph)
        sizes = ", ".join(str(len(c)) for c in found) or "-"
        in_circles = sum(len(c) for c in found)
        print(f"  import circles ({label}): {len(found)} (modules in each: {sizes}; "
              f"{in_circles} of {len(mods)} modules)")  # fmt: skip
        for c in found:
            shown = c if listing or len(c) <= 8 else [*c[:8], f"... {len(c) - 8} more"]
            print(f"    - {' '.join(shown)}")
    print(f"  settings: {len(Settings.model_fields)} (bot.config.Settings.model_fields)")
    readme = ROOT / "README.md"
    print(f"  README.md: {line_count(readme) if readme.exists() else 0} lines")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--list", action="store_true", help="print the files of each figure")
    args = p.parse_args()
    logging.basicConfig(level=logging.WARNING)
    import bot

    where = Path(bot.__file__).resolve()
    if ROOT not in where.parents:
        sys.exit(f"bot is imported from {where}, not from {ROOT}: run from the tree's root")
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    print(f"tree: {ROOT} ({commit or 'not a git checkout'}), Python {sys.version.split()[0]}")
    traces = asyncio.run(traced_scenarios())
    report_traces(traces, args.list)
    report_tree(args.list)


if __name__ == "__main__":
    main()
