"""The user's files reach code as ./input/ and what code writes to ./output/ comes back,
in every sandbox mode; nothing outside the work dir can be smuggled out through it."""

from __future__ import annotations

import pytest

from tests.test_code_helpers import Env, env, needs_bwrap, needs_root
from tools.code.files import InputStore
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
    assert [(f.name, f.data) for f in res.outputs.files] == [("result.csv", b"total,3\n")]
    assert [s.split(":")[0] for s in res.outputs.skipped] == ["passwd"]
    assert (store.dir_for(key) / "data.csv").read_bytes() == b"a\nb\nc\n"  # original intact


async def test_tool_result_names_the_files_and_the_request_carries_them(env: Env) -> None:
    from tools.code.tool import build

    tool = build(env.deps)
    from tools.code.tool import CodeParams

    code = "await Bun.write('output/chart.png', new Uint8Array([137, 80, 78, 71]));"
    out = await tool.run(CodeParams(action="execute", code=code), env.call())
    assert isinstance(out, dict) and out["files_sent_to_user"] == ["chart.png"]
    assert env.ctx.files_out == [("chart.png", bytes([137, 80, 78, 71]))]
