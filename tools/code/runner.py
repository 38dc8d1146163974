"""Running one program under a plan: limits, timeout, output caps, and no hanging waits.
On Python 3.11 `Process.wait()` returns only once the pipes close, which a detached
grandchild holding stdout delays forever: the exit is learnt through a pidfd, both pipes
are drained past the output cap (or the child blocks), and every wait after the exit is
bounded.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tools.code import files
from tools.code.bun import BunInfo
from tools.code.diskuse import usage
from tools.code.egress import EgressProxy
from tools.code.modes import probe_kernel
from tools.code.sandbox import (
    CONFINED,
    TASKS_PER_RUN,
    Limits,
    Mode,
    Plan,
    build_plan,
    drop_uid_argv,
    egress_capable,
    own_task_count,
    prepare_workdir,
    uid_block,
)
from tools.code.spawn import spawn as _spawn
from tools.code.tree import remove_tree

log = logging.getLogger(__name__)

KEEP_BYTES = 64 * 1024  # per stream, what we store
KILL_BYTES = 1024 * 1024  # both streams together: beyond this the run is killed
READ_CHUNK = 65536
EXIT_GRACE_S = 0.5  # after the exit, how long a pipe may stay open before we kill
FINAL_WAIT_S = 2.0
# output/ is on the host's disk (bound into the sandbox so files outlive the run): its
# size is polled during the run, which is stopped past the cap (per file, RLIMIT_FSIZE).
DISK_CAP_BYTES = 128 * 1024 * 1024
DISK_CAP_FILES = 1000
DISK_POLL_S = 0.1


@dataclass
class RunResult:
    stdout: str
    stderr: str
    exit_code: int | None  # 128+N when killed by signal N
    duration_ms: float
    timed_out: bool = False
    output_limited: bool = False
    disk_limited: bool = False  # wrote more files than DISK_CAP_* allow
    stdout_truncated: bool = False
    stderr_truncated: bool = False
    sandbox_error: str | None = None  # the run could not be started
    outputs: files.Collected | None = None  # what the run wrote under ./output/
    # The hosts the run reached through the egress proxy; None when it had the network
    # directly (CODE_NETWORK=all, a mode without a namespace of its own), so nobody knows.
    # What such a run printed may be a page's words: outside content (tools/code/tool.py).
    reached: tuple[str, ...] | None = ()


@dataclass
class _Sink:
    kept: bytearray = field(default_factory=bytearray)
    total: int = 0

    def text(self) -> str:
        return self.kept.decode("utf-8", errors="replace")


class CodeRunner:
    def __init__(
        self,
        bun: BunInfo,
        mode: Mode,
        *,
        network: bool,
        max_concurrent: int,
        workbase: Path | None = None,
        namespaces: bool | None = None,
        egress: EgressProxy | None = None,
    ) -> None:
        self.bun = bun
        # confine.py modes: use namespaces where the kernel has them (False: tests of
        # the Landlock-only path that e.g. Ubuntu's userns restriction leads to).
        if namespaces is None:
            namespaces = mode in CONFINED and probe_kernel().namespaces
        self.namespaces = namespaces
        self.mode = mode
        # The network through the egress proxy: where the mode gives the run a network
        # namespace of its own (bwrap, confine.py with namespaces). Elsewhere confine.py
        # cannot hold the run to that rule, so its network is off (a seccomp filter, see
        # confine.deny_sockets), never every address; protection() says so.
        capable = egress_capable(mode, namespaces)
        self.network = network and (capable or egress is None or mode not in CONFINED)
        self.workbase = workbase
        self.egress = egress if self.network and capable else None
        self._slots: asyncio.Queue[int] = asyncio.Queue()
        for i in range(min(max_concurrent, 32)):
            self._slots.put_nowait(i)
        # Not root: RLIMIT_NPROC counts every task of our uid, the bot's threads too.
        self._nproc_base = 0 if os.geteuid() == 0 else own_task_count()
        self._uid_base = uid_block()
        # confine.py launchers started ahead and waiting for a plan: a Python start-up
        # per run, paid between runs instead of during one.
        self._warm: list[asyncio.subprocess.Process] = []
        self._warming: set[asyncio.Task[None]] = set()
        self._max_warm = self._slots.qsize()

    async def warmed(self) -> None:
        """Until the launchers being started are waiting (benchmarks measure after it)."""
        await asyncio.gather(*self._warming, return_exceptions=True)

    async def close(self) -> None:
        """End the waiting launchers (they would also exit when we do: stdin closes)."""
        for task in list(self._warming):
            task.cancel()
        await asyncio.gather(*self._warming, return_exceptions=True)
        if self.egress is not None:
            await self.egress.close()
        while self._warm:
            proc = self._warm.pop()
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()

    async def run(
        self, code: str, timeout_ms: int, inputs: Path | None = None, network: bool = True
    ) -> RunResult:
        """Run `code`; the files in `inputs` are copied to ./input/ first. `network`: False
        runs it without any network, whatever the runner's."""
        slot = await self._slots.get()
        try:
            return await self._run_in_slot(slot, code, timeout_ms, inputs, network)
        finally:
            self._slots.put_nowait(slot)

    async def _run_in_slot(
        self, slot: int, code: str, timeout_ms: int, inputs: Path | None, network: bool
    ) -> RunResult:
        network = self.network and network
        uid = None if self._uid_base is None or self.mode == "off" else self._uid_base + slot
        nproc = TASKS_PER_RUN if uid is not None else None
        if uid is None and self.mode != "off" and os.geteuid() != 0:
            nproc = self._nproc_base + TASKS_PER_RUN
        limits = Limits(cpu_s=math.ceil(timeout_ms / 1000) + 1, nproc=nproc)
        workdir = prepare_workdir(self.workbase, uid, self.mode)
        plan: Plan | None = None
        egress: Path | None = None
        try:
            # Modes that put a tmpfs over the work dir get input/ and output/ bound in.
            io = files.io_dir(workdir) if self.mode in ("bwrap", *CONFINED) else workdir
            try:
                if io != workdir:
                    files.private_dir(io)
                await asyncio.to_thread(files.stage, io, inputs, uid)
            except OSError as exc:
                return RunResult("", "", None, 0.0, sandbox_error=f"could not stage: {exc}")
            if network and self.egress is not None:  # a socket of its own: its slots, its uid
                egress = await self.egress.open(uid)
            plan = build_plan(
                self.mode,
                self.bun,
                workdir,
                network=network,
                limits=limits,
                uid=uid,
                namespaces=self.namespaces,
                egress=egress,
            )
            result = await self._execute(plan, code, timeout_ms, io / files.OUTPUT_DIR)
            if egress is not None and self.egress is not None:
                result.reached = self.egress.reached(egress)
            elif network:
                result.reached = None
            try:
                result.outputs = await asyncio.to_thread(files.collect, workdir)
            except (OSError, ValueError, RecursionError) as exc:  # the run is still reported
                log.warning("could not collect the files of a run: %s", exc)
                result.outputs = files.Collected(skipped=[f"output/: not read ({exc})"])
            return result
        finally:
            if egress is not None and self.egress is not None:
                await asyncio.shield(self.egress.release(egress))
            if plan is not None and plan.stdin_prefix:
                self._prewarm(plan)
            # Without a PID namespace, processes may outlive bun (setsid, double fork).
            unreaped = self.mode == "basic" or (self.mode in CONFINED and not self.namespaces)
            if uid is not None and unreaped:
                await self._kill_uid(uid)
            # In a thread (a big tree takes a while); shielded so a cancelled request
            # still leaves nothing behind.
            await asyncio.shield(asyncio.to_thread(remove_tree, workdir.parent))

    def _prewarm(self, plan: Plan) -> None:
        if len(self._warm) + len(self._warming) < self._max_warm:
            task = asyncio.create_task(self._start_warm(plan))
            self._warming.add(task)
            task.add_done_callback(self._warming.discard)

    async def _start_warm(self, plan: Plan) -> None:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            self._warm.append(await _spawn(plan))

    async def _start(self, plan: Plan) -> asyncio.subprocess.Process:
        while plan.stdin_prefix and self._warm:
            proc = self._warm.pop()
            if proc.returncode is None:
                return proc
        return await _spawn(plan)

    async def _execute(self, plan: Plan, code: str, timeout_ms: int, watched: Path) -> RunResult:
        start = time.perf_counter()
        try:
            proc = await self._start(plan)
        except (OSError, subprocess.SubprocessError) as exc:
            return RunResult("", "", None, 0.0, sandbox_error=f"could not start: {exc}")
        loop = asyncio.get_running_loop()
        exited = asyncio.Event()
        capped = asyncio.Event()
        pidfd = _watch_exit(loop, proc.pid, exited)
        out, err = _Sink(), _Sink()
        readers = [
            asyncio.create_task(_drain(proc.stdout, out, err, capped)),
            asyncio.create_task(_drain(proc.stderr, err, out, capped)),
        ]
        feeder = asyncio.create_task(_feed(proc, plan.stdin_prefix + code.encode("utf-8")))
        poller = None if pidfd is not None else asyncio.create_task(_poll_exit(proc, exited))
        disk_full = asyncio.Event()
        caps = (DISK_CAP_BYTES, DISK_CAP_FILES, disk_full.set)
        disk = asyncio.create_task(disk_watch(watched, *caps))
        timed_out = output_limited = disk_limited = False
        try:
            ends = [asyncio.create_task(e.wait()) for e in (exited, capped, disk_full)]
            await asyncio.wait(ends, timeout=timeout_ms / 1000, return_when="FIRST_COMPLETED")
            if not exited.is_set():
                output_limited = capped.is_set()
                disk_limited = disk_full.is_set() and not output_limited
                timed_out = not (output_limited or disk_limited)
                self._stop(proc.pid)
            for t in ends:
                t.cancel()
            _, pending = await asyncio.wait(readers, timeout=EXIT_GRACE_S)
            if pending:
                # Something that outlived bun still holds a pipe (same process group,
                # or escaped it in basic mode): kill what we can, then stop listening
                # (the readers are cancelled below). The pipes close when their last
                # holder dies; until then a full pipe stalls it, and proc.wait() is bounded.
                killpg(proc.pid)
                await asyncio.wait(readers, timeout=EXIT_GRACE_S)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), FINAL_WAIT_S)
            duration = (time.perf_counter() - start) * 1000
        finally:
            if proc.returncode is None:
                self._stop(proc.pid)
            for task in (*readers, feeder, poller, disk):
                if task is not None:
                    task.cancel()
            if pidfd is not None:
                loop.remove_reader(pidfd)
                os.close(pidfd)
        code_ = proc.returncode
        exit_code = None if code_ is None else (128 - code_ if code_ < 0 else code_)
        return RunResult(
            stdout=out.text(),
            stderr=err.text(),
            exit_code=exit_code,
            duration_ms=duration,
            timed_out=timed_out,
            output_limited=output_limited,
            disk_limited=disk_limited,
            stdout_truncated=out.total > len(out.kept),
            stderr_truncated=err.total > len(err.kept),
        )

    def _stop(self, pid: int) -> None:
        if self.mode in CONFINED:
            # confine.py's relay, on SIGTERM, kills bun and waits until every process
            # of the run is gone (the PID namespace's, or the orphans it inherited);
            # a SIGKILL to the group would kill the relay first and not wait.
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
        else:
            killpg(pid)

    async def _kill_uid(self, uid: int) -> None:
        """As root without a PID namespace: nothing of the throwaway uid may outlive the run."""
        try:
            proc = await asyncio.create_subprocess_exec(
                *drop_uid_argv(uid),
                "/bin/kill",
                "-KILL",
                "-1",
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL,
                env={"PATH": "/usr/bin:/bin"},
            )
            await asyncio.wait_for(proc.wait(), FINAL_WAIT_S)
        except (OSError, TimeoutError):
            log.warning("could not sweep the processes of uid %s", uid)


def killpg(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _watch_exit(loop: asyncio.AbstractEventLoop, pid: int, exited: asyncio.Event) -> int | None:
    """A pidfd that becomes readable when the child exits; None when unsupported."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        exited.set()
        return None
    except (OSError, AttributeError):
        return None
    loop.add_reader(fd, exited.set)
    return fd


async def disk_watch(top: Path, most_bytes: int, most_files: int, full: Callable[[], None]) -> None:
    """`full()` once `top` holds more than `most_bytes` or `most_files` (polled: it is on the
    host's disk, where no tmpfs caps it): a code run's output/, a generate job's work dir."""
    while True:
        await asyncio.sleep(DISK_POLL_S)
        size, count = await asyncio.to_thread(usage, top, most_bytes, most_files)
        if size > most_bytes or count > most_files:
            full()
            return


async def _poll_exit(proc: asyncio.subprocess.Process, exited: asyncio.Event) -> None:
    # Fallback for kernels without pidfd_open (< 5.3).
    while proc.returncode is None:  # noqa: ASYNC110
        await asyncio.sleep(0.02)
    exited.set()


async def _feed(proc: asyncio.subprocess.Process, data: bytes) -> None:
    assert proc.stdin is not None
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        proc.stdin.write(data)
        await proc.stdin.drain()
        proc.stdin.close()


async def _drain(
    stream: asyncio.StreamReader | None, sink: _Sink, other: _Sink, capped: asyncio.Event
) -> None:
    """Read to EOF whatever happens: keep the first KEEP_BYTES, count the rest."""
    assert stream is not None
    while True:
        chunk = await stream.read(READ_CHUNK)
        if not chunk:
            return
        room = KEEP_BYTES - len(sink.kept)
        if room > 0:
            sink.kept += chunk[:room]
        sink.total += len(chunk)
        if sink.total + other.total > KILL_BYTES:
            capped.set()
