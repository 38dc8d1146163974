"""Code tool overhead: per-run cost over bare `bun run -` in every sandbox mode this
machine has (bwrap, landlock with namespaces, landlock alone, namespace view, basic, off),
and throughput with 4 concurrent requests. `--memory` re-measures bun's address-space needs.

    .venv/bin/python bench/code_exec.py [--runs 60] [--heap-mb 200] [--memory]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tools.code.bun import BunInfo, locate_bun, probe_bun
from tools.code.modes import Kernel, choose_mode, probe_kernel
from tools.code.runner import CodeRunner

CODE = "console.log(1)"


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))]


def children_cpu_ms() -> float:
    """CPU time of every child we reaped so far (sandbox helpers and bun included):
    less bent by other load on the machine than wall time. Undercounts bwrap, whose
    namespace's processes are not all reaped by a process we wait for."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (r.ru_utime + r.ru_stime) * 1000


async def bare_once(argv: list[str]) -> float:
    start = time.perf_counter()
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={"PATH": "/usr/bin:/bin", "HOME": "/tmp"},
    )
    out, _ = await proc.communicate(CODE.encode())
    assert out.strip() == b"1", out
    return (time.perf_counter() - start) * 1000


async def runner_once(runner: CodeRunner) -> float:
    start = time.perf_counter()
    res = await runner.run(CODE, 10_000)
    took = (time.perf_counter() - start) * 1000
    assert res.stdout.strip() == "1", (res.stdout, res.stderr)
    await runner.warmed()  # the next launcher starts between runs, not during the next
    return took


async def throughput(runner: CodeRunner, total: int, concurrency: int) -> float:
    queue = list(range(total))

    async def worker() -> None:
        while queue:
            queue.pop()
            await runner.run(CODE, 10_000)

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return total / (time.perf_counter() - start)


ALL_MODES = ["bwrap", "landlock", "landlock-only", "namespace", "basic", "off"]


def available(mode: str, bwrap: bool, kernel: Kernel) -> bool:
    return {
        "bwrap": bwrap,
        "landlock": kernel.landlock_abi > 0,
        "landlock-only": kernel.landlock_abi > 0,
        "namespace": kernel.namespaces,
    }.get(mode, True)


def make_runner(bun: BunInfo, mode: str, slots: int) -> CodeRunner:
    """landlock-only: Landlock without namespaces, as where the kernel refuses them."""
    base = "landlock" if mode == "landlock-only" else mode
    ns = False if mode == "landlock-only" else None
    return CodeRunner(bun, base, network=True, max_concurrent=slots, namespaces=ns)  # type: ignore[arg-type]


async def main(runs: int, heap_mb: int) -> None:
    # A bot-sized heap in this process: what a fork() (any preexec_fn) would have to copy.
    ballast = [bytearray(b"x" * (1024 * 1024)) for _ in range(heap_mb)]
    bun = probe_bun(locate_bun())
    print(
        f"bun {bun.version} at {bun.path}; flags {' '.join(bun.run_flags)}; "
        f"{os.cpu_count()} cpus; {len(ballast)} MB ballast heap; {runs} runs per mode"
    )
    kernel = probe_kernel()
    release = os.uname().release
    print(f"kernel {release}: Landlock ABI {kernel.landlock_abi}, namespaces {kernel.namespaces}")
    best, why = choose_mode("on")
    modes = [m for m in ALL_MODES if available(m, best == "bwrap", kernel)]
    if best != "bwrap":
        print(f"(bwrap unavailable: {why})")
    # Interleaved: each sandboxed run is paired with a bare run next to it, so load from
    # other processes on the machine hits both sides alike.
    for mode in modes:
        runner = make_runner(bun, mode, 4)
        for _ in range(3):
            await bare_once(bun.argv())
            await runner_once(runner)
        bare, boxed, cpu_diffs = [], [], []
        for _ in range(runs):
            cpu0 = children_cpu_ms()
            bare.append(await bare_once(bun.argv()))
            cpu1 = children_cpu_ms()
            boxed.append(await runner_once(runner))
            cpu_diffs.append((children_cpu_ms() - cpu1) - (cpu1 - cpu0))
        await runner.close()
        diffs = [b - a for a, b in zip(bare, boxed, strict=True)]
        print(
            f"sandbox {mode:13s}: run p50 {statistics.median(boxed):5.1f} ms"
            f" p95 {pct(boxed, 95):5.1f}"
            f" | bare p50 {statistics.median(bare):5.1f} p95 {pct(bare, 95):5.1f}"
            f" | overhead p50 {statistics.median(diffs):+5.1f} ms p95 {pct(diffs, 95):+5.1f} ms"
            f" | CPU overhead p50 {statistics.median(cpu_diffs):+5.1f} ms"
        )
    for mode in modes:
        for slots in (2, 4):
            runner = make_runner(bun, mode, slots)
            rate = await throughput(runner, max(40, runs), 4)
            await runner.close()
            print(f"4 concurrent requests, {mode:13s} MAX_CONCURRENT={slots}: {rate:6.1f} runs/s")


def memory(bun_path: str) -> None:
    """Run a JIT-sensitive loop under RLIMIT_AS steps: start failure, no JIT, JIT."""
    import subprocess

    loop = "let s = 0; for (let i = 0; i < 3e7; i++) s += i; console.log(s)"
    print("RLIMIT_AS   result")
    for mib in (300, 340, 350, 512, 1024, 2048, 2100, 2200, 2300, 2560, 3072, 4096):
        limit = mib * 1024 * 1024

        def cap(limit: int = limit) -> None:
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

        start = time.perf_counter()
        res = subprocess.run(
            [bun_path, "run", "-"], input=loop.encode(), capture_output=True, preexec_fn=cap,
            env={"PATH": "/usr/bin:/bin", "HOME": "/tmp"},
        )  # fmt: skip
        ms = (time.perf_counter() - start) * 1000
        state = "ok" if res.returncode == 0 else f"fails (exit {res.returncode})"
        print(f"{mib:5d} MiB   {state:18s} {ms:7.0f} ms")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=60)
    ap.add_argument("--memory", action="store_true")
    ap.add_argument("--heap-mb", type=int, default=200)
    a = ap.parse_args()
    if a.memory:
        memory(locate_bun())
    else:
        asyncio.run(main(a.runs, a.heap_mb))
