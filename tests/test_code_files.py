"""The user's files reach code as ./input/ and what code writes to ./output/ comes back,
in every sandbox mode; nothing outside the work dir can be smuggled out through it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_code_helpers import STRONG_MODES, Env, env, needs_bwrap, needs_root
from tools.code.files import OUTPUT_FILES, InputStore
from tools.code.runner import CodeRunner
from tools.code.tool import CodeService

__all__ = ["env"]

MODES = [
    pytest.param("on", marks=needs_bwrap, id="bwrap"),
    pytest.param("basic", marks=needs_root, id="basic"),
    pytest.param("off", id="off"),
]

CODE = """
import { readFileSync, writeFileSync, symlinkSync, mkdirSync } from "node:fs";
const t = readFileSync("input/data.csv", "utf8");
console.log("rows", t.trim().split("\\n").length);
try { writeFileSync("input/data.csv", "changed"); } catch (e) { console.log("ro", e.code); }
mkdirSync("output/sub");
writeFileSync("output/sub/result.csv", "total,3\\n");
symlinkSync("/etc/passwd", "output/passwd");
"""


def service(env: Env, mode: str) -> CodeService:
    svc = env.service(code_sandbox="off" if mode == "off" else "on")
    if mode == "basic":
        assert svc.runner is not None
        svc.mode = "basic"
        svc.runner = CodeRunner(svc.runner.bun, "basic", network=True, max_concurrent=2)
    return svc


@pytest.mark.parametrize("mode", MODES)
async def test_inputs_in_outputs_out(env: Env, mode: str) -> None:
    svc = service(env, mode)
    store = InputStore(env.settings.data_dir / "inputs")
    key = f"tg{env.ctx.telegram_user_id}" if env.ctx.telegram_user_id else f"u{env.ctx.user_id}"
    store.write(key, "data.csv", b"a\nb\nc\n")
    _, res, cat = await svc.execute(CODE, 5000, env.call())
    assert cat is None, res.stderr
    assert "rows 3" in res.stdout
    assert res.outputs is not None
    assert res.outputs.files == [("result.csv", b"total,3\n")]
    assert [s.split(":")[0] for s in res.outputs.skipped] == ["passwd"]
    assert (store.dir_for(key) / "data.csv").read_bytes() == b"a\nb\nc\n"  # original intact


async def test_tool_result_names_the_files_and_the_request_carries_them(env: Env) -> None:
    from tools.code.tool import build

    tool = build(env.deps)
    from tools.code.tool import CodeParams

    code = "await Bun.write('output/chart.png', new Uint8Array([137, 80, 78, 71]));"
    out = await tool.run(CodeParams(action="execute", code=code), env.call())
    assert isinstance(out, dict) and out["files_sent_to_user"] == ["chart.png"]
    assert env.ctx.state(OUTPUT_FILES) == [("chart.png", bytes([137, 80, 78, 71]))]


# 30 files of 8 MiB: each under the per-file limit, together past the 128 MiB cap on
# output/, which is on the host's disk. The loop would fill the disk until the timeout.
FILL_OUTPUT = """
import { writeFileSync } from "node:fs";
const block = new Uint8Array(8 * 1024 * 1024).fill(7);
for (let i = 0; ; i++) {
  writeFileSync(`output/f${i}.bin`, block);
  if (i % 10 === 0) await Bun.sleep(50);
}
"""


@pytest.mark.parametrize("mode", [*STRONG_MODES, pytest.param("off", id="off")])
async def test_filling_output_stops_the_run_and_frees_the_disk(env: Env, mode: str) -> None:
    import os
    import shutil
    import tempfile

    from tools.code.runner import DISK_CAP_BYTES

    svc = env.service(code_sandbox="off") if mode == "off" else env.in_mode(mode)
    assert svc.runner is not None
    # A base of its own (traversable by the run's throwaway uid), so other runs' work
    # dirs cannot be mistaken for leftovers of this one.
    base = Path(tempfile.mkdtemp(prefix="sidekick-fill-"))
    os.chmod(base, 0o755)
    svc.runner.workbase = base
    _, res, cat = await svc.execute(FILL_OUTPUT, 20000, env.call())
    if mode == "landlock-only":  # output/ is inside the work dir: confine.py's watcher
        assert "the work dir passed 128 MiB" in res.stderr and not res.timed_out
    else:
        assert res.disk_limited and not res.timed_out, (res.stdout, res.stderr)
        assert cat == "output_limit"
    assert res.duration_ms < 15000
    assert res.outputs is not None
    sent = sum(len(data) for _, data in res.outputs.files)
    assert sent <= 50 * 2**20 and res.outputs.skipped  # the collection caps still apply
    left = os.listdir(base)
    shutil.rmtree(base)
    assert left == []  # work dir and output/ removed
    assert DISK_CAP_BYTES == 128 * 2**20


async def test_tool_tells_the_model_why_the_run_stopped(env: Env) -> None:
    from tools.code.tool import CodeParams, build

    tool = build(env.deps)
    out = await tool.run(CodeParams(action="execute", code=FILL_OUTPUT), env.call())
    assert isinstance(out, dict)
    assert out["error_category"] == "output_limit"
    assert "128 MiB" in out["note"]
