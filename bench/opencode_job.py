"""OpenCode jobs: from the job's start to OpenCode's first step, the whole job, and the
sandbox's peak resident memory, with the fake model scripted to write a file, run it with
bun and finish (so the figures are OpenCode's and the sandbox's, not a model's). Prints
the install's size too. Needs `make install-opencode` (or SIDEKICK_OPENCODE_DIR).

    .venv/bin/python bench/opencode_job.py [--runs 3]
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.cli import options
from tests.fakes.openai_server import Calls, FakeOpenAI, Lane, Text
from tools.code.bun import locate_bun, probe_bun
from tools.code.opencode import Budget, OpenCodeRunner, Progress, locate_opencode
from tools.code.relay import ModelRelay, RelayJob
from tools.code.sandbox import uid_block
from tools.model_call import ModelCall

JOB = RelayJob(ModelCall("code"), ("fake-model",))


def script() -> list[Any]:
    return [
        Calls([("write", {"filePath": "/work/hello.ts", "content": "console.log(6 * 7)\n"})]),
        Calls([("bash", {"command": "bun run hello.ts", "description": "run it"})]),
        Text("Wrote hello.ts; it prints 42."),
    ]


def size_mb(folder: Path) -> float:
    files = (p for p in folder.rglob("*") if p.is_file() and not p.is_symlink())
    return sum(p.stat().st_size for p in files) / 1e6


async def main(runs: int) -> None:
    install = locate_opencode()
    if install is None:
        raise SystemExit("OpenCode is not installed: make install-opencode")
    print(f"OpenCode {install.version} in {install.folder}: {size_mb(install.folder):.0f} MB")
    lane = Lane(lambda body: bool(body.get("tools")), after=lambda body: Text("done"))
    titles = Lane(lambda body: not body.get("tools"), after=lambda body: Text("A title"))
    fake = await FakeOpenAI(lanes=[lane, titles]).start()
    runner = OpenCodeRunner(
        install,
        probe_bun(locate_bun()),
        ModelRelay(fake.base_url, "sk-bench"),
        "fake-model",
        Budget(600, 4 * 2**30),
        network=False,
        egress=None,
        uid_base=uid_block(),
    )
    first, total, peak = [], [], []
    try:
        for _ in range(runs):
            lane.script[:] = script()
            progress = Progress()
            with tempfile.TemporaryDirectory() as work:
                task = "Write hello.ts printing 6*7; run it."
                started = time.monotonic()
                run = await runner.run(Path(work), task, progress, JOB)
                total.append(time.monotonic() - started)
            if run.exit_code != 0 or progress.steps != 3:
                raise SystemExit(f"the job failed: {run}")
            first.append(progress.first_step_s or 0.0)
            peak.append(progress.peak_rss / 2**20)
    finally:
        await runner.close()
        await fake.stop()
    for name, values, unit in (
        ("start to first step", first, "s"),
        ("whole job (3 steps)", total, "s"),
        ("peak RSS of the sandbox", peak, "MiB"),
    ):
        shown = ", ".join(f"{v:.1f}" for v in values)
        print(f"{name}: median {statistics.median(values):.1f} {unit} ({shown})")


if __name__ == "__main__":
    asyncio.run(main(options(__doc__, runs=3).runs))
