"""The boundary itself, as real bun runs in every strong mode this machine supports:
what model-written code must not read, write, reach, keep running or fill, each with
the exact denial. Plus which mode a machine gets, and that nothing weaker runs unasked."""

from __future__ import annotations

import asyncio
import os
import random
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ON_PG
from tests.test_code_helpers import STRONG_MODES, Env, env, leftovers, needs_landlock, needs_root
from tools.code.modes import choose_mode, probe_kernel
from tools.code.runner import CodeRunner

__all__ = ["env"]

CHECKOUT = Path(__file__).resolve().parents[1]
TAG = f"{os.getpid() % 100000}.{random.randint(100, 999)}7"
# Paths outside the view do not exist in bwrap and the namespace view; Landlock denies.
DENIAL = {"bwrap": "ENOENT", "namespace": "ENOENT", "landlock": "EACCES"}
DENIAL["landlock-only"] = "EACCES"
ABI = probe_kernel().landlock_abi

READ_JS = """
import { readFileSync, readdirSync, statSync } from "node:fs";
for (const p of PATHS) {
  try {
    if (statSync(p).isDirectory()) console.log("LIST " + p + " " + readdirSync(p).join(","));
    else console.log("READ " + p + " " + readFileSync(p, "latin1").slice(0, 40));
  } catch (e) { console.log("denied " + p + " " + e.code); }
}
"""


@pytest.fixture
def runs_dir() -> Iterator[Path]:
    """A work base the throwaway uid (root runs) can reach: pytest's tmp_path is 0700."""
    path = Path(tempfile.mkdtemp(prefix="sidekick-runs-"))
    path.chmod(0o711)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def host_file() -> Iterator[Path]:
    """A host file any user may read, in a folder any user may enter: what code reads when
    nothing confines it. (The checkout is no such file: a clone under a 0700 home is out of
    the throwaway uid's reach whatever the mode.)"""
    folder = Path(tempfile.mkdtemp(prefix="sidekick-host-"))
    folder.chmod(0o755)
    path = folder / "world-readable.txt"
    path.write_text("HOST-FILE-ANYONE-MAY-READ\n")
    path.chmod(0o644)
    yield path
    shutil.rmtree(folder, ignore_errors=True)


def denied_lines(stdout: str, paths: list[str], code: str) -> None:
    assert stdout.strip().splitlines() == [f"denied {p} {code}" for p in paths], stdout


@pytest.mark.parametrize("mode", STRONG_MODES)
async def test_host_files_are_out_of_reach(
    env: Env, mode: str, tmp_path: Path, host_file: Path
) -> None:
    secret = tmp_path / "owner-only"
    secret.write_text("SHADOW-LIKE-SECRET\n")
    secret.chmod(0o600)
    dotenv = tmp_path / ".env"
    dotenv.write_text("LLM_API_KEY=sk-never-read\n")
    db = env.settings.data_dir / "sidekick.db"
    if ON_PG:  # the database is a server then: a stand-in file where SQLite's would be
        db.parent.mkdir(parents=True, exist_ok=True)
        db.write_bytes(b"SQLite format 3\x00")
    assert db.exists()
    paths = [
        str(host_file),  # world-readable: only the sandbox stops it
        str(CHECKOUT / "pyproject.toml"),
        str(CHECKOUT),
        os.path.expanduser("~"),  # noqa: ASYNC240 - no I/O
        str(secret),
        str(dotenv),
        str(db),
        str(tmp_path),
    ]
    if os.path.exists("/etc/shadow"):  # noqa: ASYNC240
        paths.append("/etc/shadow")
    svc = env.in_mode(mode)
    _, res, cat = await svc.execute(READ_JS.replace("PATHS", repr(paths)), 10000, None)
    assert cat is None, res.stderr
    denied_lines(res.stdout, paths, DENIAL[mode])


@pytest.mark.parametrize("mode", STRONG_MODES)
async def test_the_runtime_still_works_inside(env: Env, mode: str) -> None:
    """The boundary leaves what programs need: certificates, time zones, own files."""
    code = """
import { readFileSync, writeFileSync, readdirSync } from "node:fs";
import { tmpdir } from "node:os";
writeFileSync("own.txt", "mine"); writeFileSync(tmpdir() + "/t.txt", "tmp");
const certs = readdirSync("/etc/ssl/certs").length > 0;
const berlin = new Date(0).toLocaleString("en-US", { timeZone: "Europe/Berlin" });
console.log(readFileSync("own.txt", "utf8"), readFileSync(tmpdir() + "/t.txt", "utf8"),
  certs, berlin, process.cwd() === process.env.HOME || process.env.HOME.endsWith(".home"));
"""
    _, res, cat = await env.in_mode(mode).execute(code, 10000, None)
    assert cat is None, res.stderr
    assert res.stdout.strip() == "mine tmp true 1/1/1970, 1:00:00 AM true"


@pytest.mark.parametrize("mode", STRONG_MODES)
async def test_runs_work_under_the_bots_umask(env: Env, mode: str) -> None:
    """The bot runs under umask 077 (bot/ops/preflight.py); as root the code runs as a
    throwaway uid, which must still reach bun and /etc in the view built for it (the
    namespace mode's /opt/bun was 0700: "Permission denied: '/opt/bun/bun'")."""
    code = """
import { readdirSync, writeFileSync, statSync } from "node:fs";
writeFileSync("output/made.txt", "x");
console.log(readdirSync("/etc/ssl/certs").length > 0, statSync("output/made.txt").mode & 0o777);
"""
    old = os.umask(0o077)
    try:
        _, res, cat = await env.in_mode(mode).execute(code, 10000, None)
    finally:
        os.umask(old)
    assert cat is None, res.stderr
    assert res.stdout.strip() == "true 384"  # and the code's own files keep umask 077


@pytest.mark.parametrize("mode", STRONG_MODES)
async def test_another_runs_work_dir_is_out_of_reach(env: Env, mode: str, runs_dir: Path) -> None:
    svc = env.in_mode(mode)
    assert svc.runner is not None
    base = "landlock" if mode == "landlock-only" else mode
    runner = CodeRunner(
        svc.runner.bun,
        base,  # type: ignore[arg-type]
        network=True,
        max_concurrent=2,
        workbase=runs_dir,
        namespaces=svc.runner.namespaces,
    )
    first = asyncio.create_task(
        runner.run(
            'require("node:fs").writeFileSync("a.txt", "RUN-A-SECRET"); await Bun.sleep(60000)',
            3000,  # ends at its timeout, after run B
        )
    )
    try:
        # Until run A has its dir (and, on the host's disk, its file); a minute at most.
        for _ in range(3000):
            dirs = [d / "work" for d in runs_dir.iterdir() if (d / "work").is_dir()]  # noqa: ASYNC240
            if dirs and (mode != "landlock-only" or (dirs[0] / "a.txt").exists()):
                break
            await asyncio.sleep(0.02)
        (a_dir,) = dirs
        paths = [str(a_dir), str(a_dir / "a.txt"), str(runs_dir)]
        if mode != "landlock-only":  # there run A's output/ moved into its work dir
            paths.append(str(a_dir.with_name(a_dir.name + ".io") / "output"))
        res = await runner.run(READ_JS.replace("PATHS", repr(paths)), 10000)
    finally:
        await asyncio.gather(first, return_exceptions=True)
    assert "RUN-A-SECRET" not in res.stdout
    lines = res.stdout.strip().splitlines()
    if mode == "landlock" and os.geteuid() != 0:
        # Run A's files live in its own tmpfs: on the host its dir is empty (as root,
        # A's uid owns it 0700, so that denial comes first).
        assert lines.pop(1) == f"denied {paths.pop(1)} ENOENT"
    denied_lines("\n".join(lines), paths, DENIAL[mode])


@pytest.mark.parametrize("mode", STRONG_MODES)
async def test_network_off_reaches_no_loopback_port(env: Env, mode: str) -> None:
    accepted: list[int] = []

    async def on_connect(_r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        accepted.append(1)
        w.close()

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    code = f"""
try {{ const r = await fetch("http://127.0.0.1:{port}/"); console.log("fetched " + r.status); }}
catch (e) {{ console.log("fetch " + e.code); }}
try {{ await Bun.connect({{ hostname: "127.0.0.1", port: {port}, socket: {{ data() {{}} }} }});
  console.log("connected"); }} catch (e) {{ console.log("connect " + e.code); }}
try {{ const l = Bun.listen({{ hostname: "127.0.0.1", port: 0, socket: {{ data() {{}} }} }});
  console.log("listening"); l.stop(); }}
catch (e) {{ console.log("listen " + (e.code || e.name)); }}
"""
    try:
        _, res, _cat = await env.in_mode(mode, network=False).execute(code, 10000, None)
    finally:
        server.close()
        await server.wait_closed()
    assert accepted == []
    # fetch names no errno; Bun.connect and Bun.listen do. bwrap brings the loopback of
    # its empty network namespace up, confine.py leaves it down; listening there harms
    # no one. Landlock's TCP rules (ABI 4) deny connect and bind whatever the namespace.
    expected = {
        "bwrap": ["fetch ConnectionRefused", "connect ECONNREFUSED", "listening"],
        "namespace": ["fetch FailedToOpenSocket", "connect ECONNREFUSED", "listening"],
        "landlock": ["fetch FailedToOpenSocket", "connect EACCES", "listen EACCES"],
        # No network namespace: a seccomp filter refuses every socket (bun names no
        # errno for a failed listen).
        "landlock-only": ["fetch FailedToOpenSocket", "connect EACCES", "listen Error"],
    }[mode]
    assert res.stdout.strip().splitlines() == expected, res.stdout + res.stderr


@pytest.mark.parametrize("mode", STRONG_MODES)
@pytest.mark.parametrize("ending", ["exit", "timeout"])
async def test_a_daemon_does_not_outlive_the_run(env: Env, mode: str, ending: str) -> None:
    tag = f"{TAG}{len(ending)}{len(mode)}"
    code = f"""
const d = Bun.spawn(["setsid", "sh", "-c", "sleep {tag} & sleep {tag}"],
  {{ stdio: ["ignore", "ignore", "ignore"] }});
d.unref();
await Bun.sleep(100);
console.log("bye");
"""
    if ending == "timeout":
        code += "while (true) {}"
    _, res, cat = await env.in_mode(mode).execute(code, 1500, None)
    assert cat == (None if ending == "exit" else "timeout"), res.stderr
    assert res.stdout.strip() == "bye"
    assert leftovers(tag) == []


@pytest.mark.parametrize("mode", STRONG_MODES)
async def test_filling_tmp_and_the_work_dir_stops_at_the_cap(env: Env, mode: str) -> None:
    code = """
import { writeFileSync } from "node:fs";
const chunk = Buffer.alloc(8 << 20, 1);
for (const [k, dir] of ["/tmp", process.env.TMPDIR, "."].entries()) {
  let mib = 0, err = "none";
  try { for (let i = 0; i < 40; i++) { writeFileSync(`${dir}/fill-${k}-${i}`, chunk); mib += 8; } }
  catch (e) { err = e.code; }
  console.log(`${dir === "." ? "work" : dir} ${mib} ${err}`);
}
"""
    _, res, cat = await env.in_mode(mode).execute(code, 30000, None)
    lines = res.stdout.strip().splitlines()
    if mode == "landlock-only":  # no tmpfs: the launcher watches the dir and kills the run
        assert lines[0] == "/tmp 0 EACCES", res.stdout
        assert cat == "sandbox" and res.exit_code == 137
        assert res.stderr.startswith("sandbox: the work dir passed 128 MiB")
        return
    assert cat is None, res.stderr
    filled = [line.split() for line in lines]
    if mode == "landlock":  # the host's /tmp is not writable; TMPDIR is in the work tmpfs
        assert filled.pop(0) == ["/tmp", "0", "EACCES"]
    assert len(filled) in (2, 3) and all(f[2] == "ENOSPC" for f in filled), res.stdout
    if mode == "landlock":  # TMPDIR is inside the work dir: one cap for both
        assert int(filled[0][1]) + int(filled[1][1]) <= 128
    else:  # /tmp (= TMPDIR) and /work: a cap each
        assert [f[1] for f in filled] == ["128", "0", "128"], res.stdout


def test_the_fallback_is_used_without_bwrap_on_path(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no bwrap (nor anything else) on PATH
    mode, why = choose_mode("on")
    k = probe_kernel()
    expected = "landlock" if k.landlock_abi else "namespace" if k.namespaces else None
    assert mode == expected and "bwrap not installed" in why


@needs_landlock
async def test_a_service_without_bwrap_runs_confined(
    env: Env, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    svc = env.service()
    assert svc.mode == "landlock" and svc.protects.startswith("files: Landlock")
    paths = [str(CHECKOUT / "pyproject.toml")]
    _, res, cat = await svc.execute(READ_JS.replace("PATHS", repr(paths)), 10000, None)
    assert cat is None and res.stdout.strip() == f"denied {paths[0]} EACCES", res.stderr


async def test_no_sandbox_refuses_unless_unsafe_basic_is_set(
    env: Env, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from tools.base import ToolError
    from tools.code import modes

    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(modes, "probe_kernel", lambda: modes.Kernel(0, False))
    refused = env.service()
    assert refused.mode == "refused" and refused.runner is None
    assert refused.mode_reason.startswith("Code execution is off because this machine")
    assert "CODE_SANDBOX=unsafe-basic" in refused.mode_reason
    with pytest.raises(ToolError, match="apt-get install bubblewrap"):
        await refused.execute("console.log(1)", 5000, None)
    unsafe = env.service(code_sandbox="unsafe-basic")
    assert unsafe.mode == "basic" and "NOT protected" in unsafe.protects
    _, res, cat = await unsafe.execute("console.log(6 * 7)", 5000, None)
    assert cat is None and res.stdout.strip() == "42"


@needs_root
async def test_basic_mode_leaves_host_files_readable(env: Env, host_file: Path) -> None:
    """Why basic needs the explicit setting: the host's files are open to the code (the
    same file every strong mode denies in test_host_files_are_out_of_reach)."""
    path = str(host_file)
    _, res, _ = await env.in_mode("basic").execute(
        READ_JS.replace("PATHS", repr([path])), 10000, None
    )
    assert res.stdout == f"READ {path} HOST-FILE-ANYONE-MAY-READ\n\n", res.stdout


@pytest.mark.parametrize("mode", STRONG_MODES)
async def test_a_launcher_failure_is_a_sandbox_error_and_the_next_run_works(
    env: Env, mode: str
) -> None:
    from tools.code.bun import BunInfo

    svc = env.in_mode(mode)
    assert svc.runner is not None
    good = svc.runner.bun
    svc.runner.bun = BunInfo(path="/nonexistent/bun", version="0", run_flags=())
    _, res, cat = await svc.execute("console.log(1)", 5000, None)
    assert cat == "sandbox" and res.exit_code != 0
    if mode != "bwrap":
        assert res.stderr.startswith("sandbox: "), res.stderr
    svc.runner.bun = good
    _, res, cat = await svc.execute("console.log(6 * 7)", 5000, None)
    assert cat is None and res.stdout.strip() == "42"


@pytest.mark.skipif(
    probe_kernel().landlock_abi == 0 and not probe_kernel().namespaces,
    reason="no fallback sandbox on this kernel",
)
async def test_startup_log_names_the_mode_and_what_it_protects(
    env: Env, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level("INFO", logger="tools.code.tool")
    svc = env.service()
    svc.announce()  # the tool's start-up line (said once, when the app builds the tool)
    best = caplog.messages[-1]
    assert f"sandbox {svc.mode} (" in best and "protects files: " in best
    monkeypatch.setenv("PATH", str(tmp_path))  # bwrap hidden
    fallback = env.service()
    fallback.announce()
    line = caplog.messages[-1]
    assert f"sandbox {fallback.mode} (" in line and "bwrap not installed" in line
    assert line.endswith("for the full sandbox, install bubblewrap (apt-get install bubblewrap)")


def test_landlock_rights_follow_the_abi() -> None:
    from tools.code import confine

    assert confine.fs_rights(1) == (1 << 13) - 1  # execute .. make_sym
    assert confine.fs_rights(2) == confine.fs_rights(1) | confine.FS_REFER
    assert confine.fs_rights(4) == confine.fs_rights(3) == (1 << 15) - 1  # + truncate
    assert confine.fs_rights(7) == (1 << 16) - 1  # + ioctl_dev (ABI 5)
    assert confine.landlock_abi() == probe_kernel().landlock_abi


@pytest.mark.parametrize(
    ("abi", "namespaces", "setting", "expected"),
    [
        (7, True, "on", "landlock"),
        (1, False, "on", "landlock"),
        (3, False, "on", "landlock"),  # a seccomp filter takes the network away
        (3, False, "unsafe-basic", "landlock"),
        (3, True, "on", "landlock"),  # the network namespace does it
        (0, True, "on", "namespace"),
        (0, False, "on", None),
        (0, False, "unsafe-basic", "basic"),
        (7, True, "off", "off"),
    ],
)
def test_mode_choice_without_bwrap(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    abi: int,
    namespaces: bool,
    setting: str,
    expected: str | None,
) -> None:
    from tools.code import modes

    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(modes, "probe_kernel", lambda: modes.Kernel(abi, namespaces))
    mode, why = choose_mode(setting)
    assert mode == expected, why
    if expected is None:
        assert why.startswith("Code execution is off") and why.count(". ") == 0
