"""OpenCode, found and run: one generation job is `opencode run --format json` in bubblewrap.

A job gets its work dir at /work (on the host's disk, kept until delivered: a restart finds
it), a private size-capped HOME and /tmp, the installed config read-only (nothing installed
at start), and a loopback-only network where forward.js reaches the job's model relay socket
(relay.py: the sandbox holds no secret) and, with the network on, the egress proxy. Nothing
outside exists for its shell; the sandbox ends with bwrap, killed as a process group on
timeout, abort, the memory or disk budget and shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import os
import sys
import time
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import Any

from tools.code.bun import BunInfo
from tools.code.egress import RELAY_JS, EgressProxy
from tools.code.relay import SOCKET_NAME as MODEL_SOCKET
from tools.code.relay import ModelRelay, RelayJob
from tools.code.runner import disk_watch, killpg
from tools.code.sandbox import (
    BUN_IN_SANDBOX,
    EGRESS_IN_SANDBOX,
    RELAY_JS_IN_SANDBOX,
    Limits,
    Plan,
    _system_binds,
    bwrap_path,
    clean_env,
    drop_uid_argv,
    egress_env,
    own_task_count,
    relayed_argv,
    rlimit_argv,
    sealed,
)
from tools.code.spawn import spawn

log = logging.getLogger(__name__)

LAUNCHER_JS = Path(__file__).with_name("opencode.js")
OPENCODE_IN_SANDBOX = "/opt/opencode/opencode"
LAUNCHER_IN_SANDBOX = "/opt/sidekick/opencode.js"
MODEL_IN_SANDBOX = "/run/sidekick-model"
HOME_IN_SANDBOX = "/home/job"
WORK_IN_SANDBOX = "/work"
MODEL_PORT = 4141  # inside the job's own network namespace
HOME_BYTES = 512 * 1024**2  # OpenCode's database, logs and caches
TMP_BYTES = 512 * 1024**2
TASKS = 512  # OpenCode's threads, bun's, and what its shell starts
OPEN_FILES = 4096
MEMORY_POLL_S = 0.5
# The work dir is on the host's disk: its whole size is polled, and the job stopped past it
# (each file is held to sandbox.FILE_SIZE_BYTES by the kernel as it is written).
JOB_DISK_BYTES = 256 * 1024**2
JOB_DISK_FILES = 5000
KILL_WAIT_S = 5.0
STDERR_KEEP = 16 * 1024
PROVIDER = "sidekick"
# A job writes its files here; OpenCode is told so in the prompt.
INSTRUCTIONS = (
    "You work in {work}, an empty project folder in a sandbox: write every file there "
    "(relative paths). Bun is at /opt/bun/bun (`/opt/bun/bun run file.ts`) for running "
    "JavaScript/TypeScript; the network is {network}; nothing can be installed. When done, "
    "end with a short summary: what you wrote, how to run it, and what you checked."
)


def install_dir() -> Path:
    """Where `make install-opencode` puts it: beside this Python's packages (.venv/opencode),
    or SIDEKICK_OPENCODE_DIR (tests, an install shared by several checkouts)."""
    return Path(os.environ.get("SIDEKICK_OPENCODE_DIR") or Path(sys.prefix) / "opencode")


@dataclass(frozen=True)
class OpenCodeInstall:
    folder: Path
    binary: Path
    config: Path  # the config dir, with @opencode-ai/plugin in node_modules
    version: str


def locate_opencode(folder: Path | None = None) -> OpenCodeInstall | None:
    """The installed OpenCode, or None when there is none (or half of one)."""
    folder = folder or install_dir()
    try:
        version = (folder / "version").read_text().strip()
        binary = (folder / "opencode").resolve(strict=True)
    except OSError:
        return None
    config = folder / "config"
    if not (config / "node_modules" / "@opencode-ai" / "plugin").is_dir():
        return None
    return OpenCodeInstall(folder, binary, config, version)


@dataclass
class Progress:
    """What `status` shows while a job runs, and what its trace keeps."""

    steps: int = 0
    last_action: str = ""
    summary: str = ""  # OpenCode's last text
    error: str = ""
    first_step_s: float | None = None  # from the job's start
    peak_rss: int = 0  # bytes, the sandbox's processes together

    def read(self, event: dict[str, Any], elapsed: float) -> None:
        kind = event.get("type")
        part = event.get("part") or {}
        if kind == "step_start":
            self.steps += 1
            if self.first_step_s is None:
                self.first_step_s = elapsed
        elif kind == "tool_use":
            state = part.get("state") or {}
            what = state.get("title") or json.dumps(state.get("input") or {})[:120]
            self.last_action = f"{part.get('tool', 'tool')}: {what}"[:200]
        elif kind == "text" and part.get("text"):
            self.summary = str(part["text"]).strip()
        elif kind == "error":
            err = event.get("error") or {}
            data = err.get("data") or {}
            self.error = str(data.get("message") or err.get("name") or "OpenCode failed")[:500]


@dataclass
class JobRun:
    exit_code: int | None
    stderr: str
    timed_out: bool = False
    memory_exceeded: bool = False
    disk_exceeded: bool = False
    progress: Progress = field(default_factory=Progress)


@dataclass(frozen=True)
class Budget:
    timeout_s: float
    memory_bytes: int


def opencode_config(model: str, network: bool) -> dict[str, Any]:
    """Everything OpenCode is told: one provider (the relay, no key), its tools allowed
    without asking (nobody answers prompts in a job; the sandbox is the limit)."""
    allow = "allow"
    return {
        "$schema": "https://opencode.ai/config.json",
        "model": f"{PROVIDER}/{model}",
        "small_model": f"{PROVIDER}/{model}",
        "autoupdate": False,
        "share": "disabled",
        "snapshot": False,
        "provider": {
            PROVIDER: {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Sidekick",
                "options": {"baseURL": f"http://127.0.0.1:{MODEL_PORT}/v1", "apiKey": "relay"},
                "models": {model: {"name": model}},
            }
        },
        "permission": {
            "edit": allow,
            "bash": allow,
            "webfetch": allow if network else "deny",
            "external_directory": "deny",
            "doom_loop": "deny",
        },
    }


@dataclass(eq=False)
class OpenCodeRunner:
    """Starts jobs; shared by every job of the process (each job gets a socket of its own
    from the relay and, with the network on, from the egress proxy)."""

    install: OpenCodeInstall
    bun: BunInfo
    relay: ModelRelay
    model: str  # the default; a user's /model pick among `others` goes first
    budget: Budget
    _: KW_ONLY
    network: bool
    egress: EgressProxy | None
    # As root: each job its own throwaway uid of the block (RLIMIT_NPROC counts per uid).
    uid_base: int | None = None
    max_concurrent: int = 2  # jobs at once: each takes 0.5-0.7 GB
    others: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        self.egress = self.egress if self.network else None
        self._uids = itertools.count()
        self._nproc_base = 0 if os.geteuid() == 0 else own_task_count()
        self._slots = asyncio.Semaphore(self.max_concurrent)

    async def close(self) -> None:
        await self.relay.close()
        if self.egress is not None:
            await self.egress.close()

    async def plan(
        self, work: Path, uid: int | None, relay: Path, model: str, egress: Path | None = None
    ) -> Plan:
        """The job's bwrap command; `relay`: the folder of the job's own model socket
        (relay_server.py open_relay); `egress`: the folder of its own egress socket
        (EgressProxy.open), when its network is on."""
        env = clean_env(HOME_IN_SANDBOX, "/tmp")
        env |= {
            "OPENCODE_DISABLE_MODELS_FETCH": "1",
            "OPENCODE_DISABLE_AUTOUPDATE": "1",
            "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
            "OPENCODE_CONFIG_CONTENT": json.dumps(opencode_config(model, self.network)),
            "SIDEKICK_MODEL_SOCKET": f"{MODEL_IN_SANDBOX}/{MODEL_SOCKET}",
            "SIDEKICK_MODEL_PORT": str(MODEL_PORT),
            "SIDEKICK_OPENCODE_ARGV": json.dumps([OPENCODE_IN_SANDBOX, "run", "--format", "json"]),
            "PATH": "/opt/bun:/usr/local/bin:/usr/bin:/bin",
        }
        if egress is not None:
            local = "127.0.0.1,localhost"
            env |= egress_env(EGRESS_IN_SANDBOX) | {"NO_PROXY": local, "no_proxy": local}
        opts = _system_binds()
        opts += ["--perms", "0755", "--dir", "/opt/opencode"]
        opts += ["--ro-bind", self.bun.path, BUN_IN_SANDBOX]
        opts += ["--ro-bind", str(self.install.binary), OPENCODE_IN_SANDBOX]
        opts += ["--ro-bind", str(LAUNCHER_JS), LAUNCHER_IN_SANDBOX]
        opts += ["--ro-bind", str(RELAY_JS), RELAY_JS_IN_SANDBOX]
        opts += ["--proc", "/proc", "--dev", "/dev"]
        opts += ["--perms", "1777", "--size", str(TMP_BYTES), "--tmpfs", "/tmp"]
        opts += ["--perms", "1777", "--size", str(HOME_BYTES), "--tmpfs", HOME_IN_SANDBOX]
        opts += ["--perms", "0755", "--dir", f"{HOME_IN_SANDBOX}/.config"]
        opts += ["--ro-bind", str(self.install.config), f"{HOME_IN_SANDBOX}/.config/opencode"]
        opts += ["--bind", str(work), WORK_IN_SANDBOX, "--chdir", WORK_IN_SANDBOX]
        opts += ["--perms", "0755", "--dir", MODEL_IN_SANDBOX]
        opts += ["--ro-bind", str(relay), MODEL_IN_SANDBOX]
        if egress is not None:
            opts += ["--ro-bind", str(egress), EGRESS_IN_SANDBOX]
        # Always a network namespace of its own: the model is reached through the relay,
        # anything else through the egress proxy or not at all.
        opts += ["--unshare-net", *sealed(env)]
        nproc = TASKS if uid is not None else self._nproc_base + TASKS
        # No address space limit: bun's JIT reserves far more than it uses (_watch_memory).
        limits = rlimit_argv(Limits(None, nproc, None, open_files=OPEN_FILES)) or []
        launch = relayed_argv(self.bun, BUN_IN_SANDBOX, RELAY_JS_IN_SANDBOX, LAUNCHER_IN_SANDBOX)
        command = [*drop_uid_argv(uid), *launch]
        bwrap = bwrap_path() or "bwrap"
        argv = [*limits, bwrap, *command]
        return Plan(argv, {"PATH": "/usr/bin:/bin"}, "/", None, piped_args=tuple(opts),
                    args_at=len(limits) + 1)  # fmt: skip

    async def run(self, work: Path, prompt: str, progress: Progress, job: RelayJob) -> JobRun:
        """One job to its end; `progress` is updated as OpenCode's events arrive; `job`:
        whom its model calls are for, its model first. Cancelled (abort, shutdown), it kills
        the sandbox before it returns."""
        async with self._slots:
            return await self._run(work, prompt, progress, job)

    async def _run(self, work: Path, prompt: str, progress: Progress, job: RelayJob) -> JobRun:
        uid = None
        if self.uid_base is not None:
            uid = self.uid_base + next(self._uids) % 32
            os.chown(work, uid, uid)
        network = "on (public addresses through a proxy)" if self.network else "off"
        text = INSTRUCTIONS.format(work=WORK_IN_SANDBOX, network=network) + "\n\n" + prompt
        started = time.monotonic()
        from tools.code.relay_server import open_relay  # aiohttp: only once a job runs

        relay = await open_relay(self.relay, job, uid)
        egress = None
        try:
            egress = await self.egress.open(uid) if self.egress is not None else None
            plan = await self.plan(work, uid, relay, job.models[0], egress)
            return await self._spawned(plan, work, text, progress, started)
        finally:
            await self.relay.release(relay)
            if egress is not None and self.egress is not None:
                await self.egress.release(egress)

    async def _spawned(
        self, plan: Plan, work: Path, text: str, progress: Progress, started: float
    ) -> JobRun:
        proc = await spawn(plan)
        result = JobRun(None, "", progress=progress)
        watcher = asyncio.create_task(self._watch_memory(proc.pid, result))
        disk = asyncio.create_task(watch_disk(work, proc.pid, result))
        errors = asyncio.create_task(_tail(proc.stderr))
        try:
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(text.encode())
            with contextlib.suppress(ConnectionError):
                await proc.stdin.drain()
            proc.stdin.close()
            try:
                async with asyncio.timeout(self.budget.timeout_s):
                    await _read_events(proc.stdout, progress, started)
                    await proc.wait()
            except TimeoutError:
                result.timed_out = not (result.memory_exceeded or result.disk_exceeded)
        finally:
            watcher.cancel()
            disk.cancel()
            if proc.returncode is None:
                killpg(proc.pid)
                with contextlib.suppress(TimeoutError):
                    await asyncio.shield(asyncio.wait_for(proc.wait(), KILL_WAIT_S))
            with contextlib.suppress(TimeoutError, asyncio.CancelledError):
                result.stderr = await asyncio.wait_for(errors, 1.0)
        result.exit_code = proc.returncode
        return result

    async def _watch_memory(self, pid: int, result: JobRun) -> None:
        """The budget on resident memory, summed over the sandbox's processes (an address
        space limit would not do: bun's JIT reserves far more than it uses)."""
        while True:
            await asyncio.sleep(MEMORY_POLL_S)
            rss = await asyncio.to_thread(tree_rss, pid)
            result.progress.peak_rss = max(result.progress.peak_rss, rss)
            if rss > self.budget.memory_bytes:
                result.memory_exceeded = True
                killpg(pid)
                return


async def watch_disk(work: Path, pid: int, result: JobRun) -> None:
    """The cap on the work dir's whole size: past it, the sandbox ends (bwrap leads `pid`'s
    group; with it dies the sandbox's PID namespace)."""

    def full() -> None:
        result.disk_exceeded = True
        killpg(pid)

    await disk_watch(work, JOB_DISK_BYTES, JOB_DISK_FILES, full)


async def _read_events(stream: asyncio.StreamReader, progress: Progress, started: float) -> None:
    while True:
        try:
            line = await stream.readline()
        except ValueError:  # a line over the reader's limit: skip it
            await stream.read(1 << 20)
            continue
        if not line:
            return
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict):
            progress.read(event, time.monotonic() - started)


async def _tail(stream: asyncio.StreamReader | None) -> str:
    kept = b""
    assert stream is not None
    while chunk := await stream.read(65536):
        kept = (kept + chunk)[-STDERR_KEEP:]
    return kept.decode("utf-8", errors="replace")


def tree_rss(root: int) -> int:
    """Resident bytes of `root` and every process below it."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        pid = int(entry.name)
        children.setdefault(int(fields[1]), []).append(pid)
        rss[pid] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
    total, stack = 0, [root]
    while stack:
        pid = stack.pop()
        total += rss.get(pid, 0)
        stack.extend(children.get(pid, ()))
    return total
