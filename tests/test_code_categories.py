"""The error-category table against what the real bun prints (no sandbox needed)."""

from __future__ import annotations

import pytest

from tests.test_code_helpers import Env, env
from tools.code.categories import classify
from tools.code.runner import RunResult

__all__ = ["env"]

CASES = [
    ("console.log('fine')", None),
    ("let x = ;", "syntax"),
    ("function (", "syntax"),
    ("const s: string = 'a'; if (s) {", "syntax"),
    ("eval('let = 1')", "syntax"),
    ('import x from "no-such-pkg-xyz"; console.log(x)', "import"),
    ('const m = require("no-such-pkg-xyz")', "import"),
    ('await import("./missing-file.js")', "import"),
    ("null.foo", "type"),
    ("(1)()", "type"),
    ("undefinedVar + 1", "reference"),
    ('await fetch("http://127.0.0.1:9/")', "network"),
    ('await fetch("http://no-such-host.invalid/")', "network"),
    ('throw new Error("boom")', "runtime"),
    ('JSON.parse("{")', "runtime"),
    ("process.exit(3)", "runtime"),
    ("new Array(-1)", "runtime"),
    ("process.kill(process.pid, 'SIGSEGV')", "memory"),  # a crash: exit 139
    ("process.kill(process.pid, 'SIGTERM')", "killed"),
]


@pytest.mark.parametrize(("code", "expected"), CASES)
async def test_category_of_real_bun_output(env: Env, code: str, expected: str | None) -> None:
    # Direct network (CODE_NETWORK=all): through the egress proxy a refused
    # address is an HTTP error response, which a program need not fail on.
    svc = env.service(code_network="all")
    _, res, cat = await svc.execute(code, 20000, None)
    assert cat == expected, (res.exit_code, res.stderr[-400:])


def result(**kw: object) -> RunResult:
    base: dict[str, object] = {"stdout": "", "stderr": "", "exit_code": 1, "duration_ms": 1.0}
    base.update(kw)
    return RunResult(**base)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("res", "expected"),
    [
        (result(stderr="RangeError: Out of memory\n at x"), "memory"),
        (result(exit_code=139), "memory"),
        (result(exit_code=152), "timeout"),  # SIGXCPU: the CPU-seconds limit
        (result(exit_code=137, timed_out=True), "timeout"),
        (result(exit_code=137, output_limited=True), "output_limit"),
        (result(stderr="bwrap: Can't find source path /x: No such file"), "sandbox"),
        (result(sandbox_error="could not start"), "sandbox"),
        (result(exit_code=None), "killed"),
        (result(stderr="error: connect ECONNREFUSED 127.0.0.1:9"), "network"),
        (result(exit_code=0, stderr="warning: something"), None),
    ],
)
def test_category_rules(res: RunResult, expected: str | None) -> None:
    assert classify(res) == expected
