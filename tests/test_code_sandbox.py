"""Hostile programs against the real bun in the real sandbox: each one is contained and
the runner keeps serving, in every mode this machine supports (see MODES). The
filesystem, network and size boundaries have their own file: test_code_confinement.py."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
from sqlalchemy import select

from tests.conftest import ON_PG
from tests.test_code_helpers import (
    MODES,
    SECRET_TOKEN,
    Env,
    env,
    gone,
    needs_bwrap,
)
from tools.code.models import CodeExecution
from tools.code.tool import CodeService

__all__ = ["env"]

# A sleep length no other process on the host uses (parallel test runs share /proc).
TAG = f"{os.getpid() % 100000}.{random.randint(100, 999)}"


def service(env: Env, mode: str) -> CodeService:
    return env.in_mode(mode)


def landed(*paths: Path) -> bool:
    return any(p.exists() for p in paths)


async def still_serves(svc: CodeService) -> None:
    _, res, cat = await svc.execute("console.log(6 * 7)", 5000, None)
    assert cat is None and res.stdout.strip() == "42"


@pytest.mark.parametrize("mode", MODES)
async def test_infinite_loop_is_killed_at_the_timeout(env: Env, mode: str) -> None:
    svc = service(env, mode)
    _row_id, res, cat = await svc.execute("while (true) {}", 800, env.call())
    assert cat == "timeout" and res.timed_out and res.exit_code == 137, (cat, res)
    await still_serves(svc)


@needs_bwrap
async def test_cpu_hog_in_workers_is_killed_and_others_still_run(env: Env) -> None:
    import asyncio

    svc = service(env, "bwrap")
    hog = """
const src = "while (true) { Math.sqrt(Math.random()) }";
const url = URL.createObjectURL(new Blob([src], { type: "application/javascript" }));
for (let i = 0; i < 4; i++) new Worker(url);
await Bun.sleep(100000);
"""
    hog_run = asyncio.create_task(svc.execute(hog, 1500, None))
    await still_serves(svc)  # the second slot runs while the hog burns every core
    _, res, cat = await hog_run
    assert cat == "timeout" and res.exit_code is not None and res.exit_code > 128


@pytest.mark.parametrize("mode", MODES)
async def test_spawn_bomb_hits_the_process_limit_and_leaves_nothing(env: Env, mode: str) -> None:
    svc = service(env, mode)
    bomb = """
import { spawn } from "node:child_process";
let ok = 0; const errs = {};
for (let i = 0; i < 3000; i++) {
  try {
    const c = spawn("sleep", [TAG], { stdio: "ignore" });
    c.on("error", (e) => { errs[e.code] = (errs[e.code] || 0) + 1; });
    ok++;
  } catch (e) { errs[e.code] = (errs[e.code] || 0) + 1; }
  if (i % 50 === 0) await Bun.sleep(1);
}
await Bun.sleep(200);
console.log(JSON.stringify(errs));
await Bun.sleep(100000);
"""
    _, res, cat = await svc.execute(bomb.replace("TAG", repr(TAG + "1")), 4000, None)
    # Spawning stopped with EAGAIN (RLIMIT_NPROC, even though the bot is root) or bun
    # itself could not make threads; either way the run ended and nothing survived it.
    assert "EAGAIN" in res.stdout or cat == "killed", (res.stdout, res.stderr[-300:])
    assert cat in {"timeout", "killed"}
    assert await gone(TAG + "1") == []
    await still_serves(svc)


@pytest.mark.parametrize("mode", MODES)
async def test_memory_bomb_stops_at_the_address_space_limit(env: Env, mode: str) -> None:
    svc = service(env, mode)
    _, res, cat = await svc.execute(
        "const a = []; while (true) a.push(new Array(1e6).fill(1.5));", 60000, None
    )
    assert cat == "memory" and not res.timed_out, res.stderr[-300:]
    await still_serves(svc)


@pytest.mark.parametrize("mode", MODES)
async def test_endless_output_is_capped_and_stored_truncated(env: Env, mode: str) -> None:
    svc = service(env, mode)
    row_id, res, cat = await svc.execute(
        'while (true) { console.log("x".repeat(1000)); console.error("e".repeat(100)); }',
        60000,
        env.call(),
    )
    assert cat == "output_limit" and res.output_limited and not res.timed_out
    assert res.stdout_truncated and len(res.stdout) == 64 * 1024
    async with env.deps.session_factory() as s:
        row = await s.get(CodeExecution, row_id)
    assert row is not None and row.stdout_truncated and row.error_category == "output_limit"
    await still_serves(svc)


@pytest.mark.parametrize("mode", [*MODES, pytest.param("off", id="off")])
async def test_environment_holds_no_secret(
    env: Env, mode: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", SECRET_TOKEN)
    monkeypatch.setenv("LLM_API_KEY", "sk-test-secret-key-123456")
    monkeypatch.setenv("BUN_OPTIONS", "--preload /nonexistent.js")
    monkeypatch.setenv("NODE_OPTIONS", "--require /nonexistent.js")
    svc = service(env, mode) if mode != "off" else env.service(code_sandbox="off")
    _, res, cat = await svc.execute("console.log(JSON.stringify(process.env))", 5000, None)
    assert cat is None, res.stderr
    assert "HOME" in res.stdout
    for secret in [SECRET_TOKEN, "sk-test-secret-key-123456", "BUN_OPTIONS", "NODE_OPTIONS"]:
        assert secret not in res.stdout


@pytest.mark.parametrize("mode", MODES)
async def test_bot_process_environ_is_unreachable(env: Env, mode: str) -> None:
    svc = service(env, mode)
    code = f"""
import {{ readFileSync }} from "node:fs";
try {{ console.log(readFileSync("/proc/{os.getpid()}/environ", "utf8")); }}
catch (e) {{ console.log("denied " + e.code); }}
"""
    _, res, _cat = await svc.execute(code, 5000, None)
    assert res.stdout.startswith("denied"), res.stdout[:200]
    assert SECRET_TOKEN not in res.stdout and "PATH=" not in res.stdout


@pytest.mark.parametrize("mode", MODES)
async def test_database_dotenv_and_ssh_are_unreachable(env: Env, mode: str, tmp_path: Path) -> None:
    svc = service(env, mode)
    dotenv = tmp_path / ".env"
    dotenv.write_text(f"TELEGRAM_BOT_TOKEN={SECRET_TOKEN}\n")
    ssh = tmp_path / "home" / ".ssh"
    ssh.mkdir(parents=True)
    (ssh / "id_ed25519").write_text("PRIVATE-KEY-MATERIAL\n")
    db_path = env.settings.data_dir / "sidekick.db"
    assert ON_PG or db_path.exists()  # under make test-pg the database is a server
    home_ssh = os.path.expanduser("~/.ssh")  # noqa: ASYNC240 - no I/O
    targets = [str(dotenv), str(ssh / "id_ed25519"), str(db_path), home_ssh]
    code = f"""
import {{ readFileSync, readdirSync }} from "node:fs";
for (const p of {targets!r}) {{
  try {{ console.log("READ " + p + " " + readFileSync(p, "latin1").slice(0, 40)); }}
  catch (e) {{
    try {{ console.log("LIST " + p + " " + readdirSync(p).join(",")); }}
    catch (e2) {{ console.log("denied " + p + " " + e.code); }}
  }}
}}
"""
    _, res, cat = await svc.execute(code, 5000, None)
    assert cat is None, res.stderr
    lines = res.stdout.strip().splitlines()
    assert len(lines) == 4 and all(line.startswith("denied") for line in lines), res.stdout


@pytest.mark.parametrize("mode", MODES)
async def test_writes_outside_the_work_dir_do_not_land(env: Env, mode: str, tmp_path: Path) -> None:
    svc = service(env, mode)
    outside = tmp_path / "planted.txt"
    # The host's /tmp is shared with the other test processes (pytest -n): a name of its own.
    in_tmp = Path(f"/tmp/planted-by-code-{tmp_path.name}-{os.getpid()}.txt")
    code = f"""
import {{ writeFileSync }} from "node:fs";
for (const p of ["{outside}", "/usr/planted.txt", "{in_tmp}", "./inside.txt"]) {{
  try {{ writeFileSync(p, "x"); console.log("wrote " + p); }}
  catch (e) {{ console.log("denied " + p + " " + e.code); }}
}}
"""
    _, res, cat = await svc.execute(code, 5000, None)
    assert cat is None, res.stderr
    assert f"denied {outside}" in res.stdout and "denied /usr/planted.txt" in res.stdout
    assert "wrote ./inside.txt" in res.stdout
    assert not landed(outside, Path("/usr/planted.txt"))
    if mode != "basic":  # a private /tmp, or none writable (Landlock)
        assert not landed(in_tmp)
    else:
        in_tmp.unlink(missing_ok=True)  # noqa: ASYNC240


@pytest.mark.parametrize("mode", MODES)
async def test_setsid_child_does_not_outlive_the_timeout(env: Env, mode: str) -> None:
    svc = service(env, mode)
    code = f'Bun.spawn(["setsid", "sleep", "{TAG}2"]); console.log("started");'
    code += " await Bun.sleep(100000);"
    _, res, cat = await svc.execute(code, 1000, None)
    assert cat == "timeout" and res.stdout.strip() == "started"
    assert await gone(TAG + "2") == []


@pytest.mark.parametrize("mode", MODES)
async def test_exit_zero_with_a_detached_child_holding_stdout(env: Env, mode: str) -> None:
    svc = service(env, mode)
    code = """
const io = { stdout: "inherit", stderr: "inherit" };
const c = Bun.spawn(["setsid", "sh", "-c", "sleep TAG"], io);
c.unref();
console.log("bye");
"""
    _, res, cat = await svc.execute(code.replace("TAG", TAG + "3"), 60000, None)
    # Returned on bun's exit, not on the timeout, and the holder is gone.
    assert cat is None and not res.timed_out and res.stdout.strip() == "bye"
    assert await gone(TAG + "3") == []


@pytest.mark.parametrize("mode", MODES)
async def test_missing_package_is_not_downloaded(env: Env, mode: str) -> None:
    svc = service(env, mode)
    _row_id, res, cat = await svc.execute(
        'import leftPad from "left-pad"; console.log(leftPad("1", 3, "0"));', 20000, None
    )
    assert cat == "import" and "Cannot find package" in res.stderr


@needs_bwrap
async def test_network_off_has_no_network(env: Env) -> None:
    svc = env.service(code_network="off")
    code = 'try { await fetch("http://1.1.1.1/"); console.log("reached"); }'
    code += ' catch (e) { console.log("offline " + (e.code || e.message)); }'
    _, res, _cat = await svc.execute(code, 10000, None)
    assert res.stdout.startswith("offline"), res.stdout


async def test_every_outcome_is_traced(env: Env) -> None:
    svc = env.service()
    await svc.execute("console.log(1)", 5000, env.call("c-ok", "try it"))
    await svc.execute("while (true) {}", 500, env.call("c-timeout"))
    await svc.execute("let x = ;", 5000, env.call("c-syntax"))
    async with env.deps.session_factory() as s:
        rows = list((await s.execute(select(CodeExecution).order_by(CodeExecution.id))).scalars())
    assert [(r.tool_call_id, r.success, r.error_category) for r in rows] == [
        ("c-ok", True, None),
        ("c-timeout", False, "timeout"),
        ("c-syntax", False, "syntax"),
    ]
    first = rows[0]
    assert first.user_id == env.ctx.user_id and first.session_id == env.ctx.session_id
    assert first.trigger_message == env.ctx.trigger_message_id
    assert first.llm_reasoning == "try it" and first.stdout == "1\n" and first.exit_code == 0
    assert first.sandbox_mode == svc.mode and first.code == "console.log(1)"


async def test_a_sandbox_failure_is_traced(env: Env) -> None:
    from tools.code.bun import BunInfo
    from tools.code.runner import CodeRunner

    svc = env.service()
    broken = BunInfo(path="/nonexistent/bun", version="0", run_flags=())
    svc.runner = CodeRunner(broken, svc.mode, network=True, max_concurrent=1)
    row_id, _res, cat = await svc.execute("console.log(1)", 5000, env.call("c-sandbox"))
    assert cat == "sandbox"
    async with env.deps.session_factory() as s:
        row = await s.get(CodeExecution, row_id)
    assert row is not None and row.error_category == "sandbox" and not row.success
    assert row.stderr  # what went wrong is kept


async def test_a_cancelled_run_is_traced_and_killed(env: Env) -> None:
    import asyncio

    svc = env.service()
    task = asyncio.create_task(
        svc.execute('console.log("go"); await Bun.sleep(100000)', 60000, env.call("c-cancel"))
    )
    await asyncio.sleep(0.5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    async with env.deps.session_factory() as s:
        rows = list((await s.execute(select(CodeExecution))).scalars())
    assert [(r.tool_call_id, r.error_category) for r in rows] == [("c-cancel", "killed")]
    await still_serves(svc)
