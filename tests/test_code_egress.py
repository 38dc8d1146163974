"""Model code's network follows web_fetch's rule by default: public addresses only, out
through the egress proxy from a network namespace of its own; CODE_NETWORK=all
opens it. The host's /proc/net and the launcher's command line are not visible."""

from __future__ import annotations

import asyncio
import ipaddress
import os
import shutil
import socket
import stat
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.polling import until
from tests.test_code_helpers import STRONG_MODES, Env, env
from tools.code.egress import RUN_CONNECTIONS, EgressProxy
from tools.code.runner import CodeRunner
from tools.code.sandbox import egress_capable
from tools.code.tool import CodeService
from tools.fetch.policy import Policy

__all__ = ["env"]

LOOPBACK = ipaddress.ip_address("127.0.0.1")


@pytest.fixture
async def web() -> AsyncIterator[tuple[int, list[bytes]]]:
    """A host service on 127.0.0.1 that records every request line it gets."""
    seen: list[bytes] = []

    async def on_connect(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        line = await r.readline()
        seen.append(line)
        while (await r.readline()) not in (b"\r\n", b""):
            pass
        w.write(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\nConnection: close\r\n\r\nhost-only")
        await w.drain()
        w.close()

    server = await asyncio.start_server(on_connect, "127.0.0.1", 0)
    yield server.sockets[0].getsockname()[1], seen
    server.close()
    await server.wait_closed()


def in_mode(env: Env, mode: str, policy: Policy | None) -> CodeService:
    """`env.in_mode` with the egress proxy the service builds by default (None: none)."""
    svc = env.in_mode(mode)
    assert svc.runner is not None
    old = svc.runner
    svc.runner = CodeRunner(
        old.bun,
        old.mode,
        network=True,
        max_concurrent=2,
        namespaces=old.namespaces,
        egress=EgressProxy(policy) if policy else None,
    )
    env.deps.closers.append(svc.runner.close)
    return svc


def probe(port: int) -> str:
    return f"""
for (const url of ["http://127.0.0.1:{port}/a", "http://169.254.169.254/latest/meta-data/",
                   "http://[::ffff:127.0.0.1]:{port}/b", "http://[64:ff9b::7f00:1]:{port}/c"]) {{
  try {{ const r = await fetch(url); const t = (await r.text()).trim();
        console.log(`fetch ${{r.status}} ${{t}}`); }}
  catch (e) {{ console.log("fetch error " + (e.code || e.name)); }}
}}
try {{ await Bun.connect({{ hostname: "127.0.0.1", port: {port}, socket: {{ data() {{}} }} }});
  console.log("connected"); }} catch (e) {{ console.log("connect " + e.code); }}
const fs = require("node:fs");
let tcp = "";
try {{ tcp = fs.readFileSync("/proc/net/tcp", "utf8"); }} catch (e) {{}}
console.log("host port in /proc/net/tcp: " + tcp.includes(":{port:04X} "));
"""


@pytest.mark.parametrize("mode", STRONG_MODES)
async def test_code_reaches_no_local_address_by_default(
    env: Env, mode: str, web: tuple[int, list[bytes]]
) -> None:
    port, seen = web
    svc = in_mode(env, mode, Policy(allow_private=False, opens="CODE_NETWORK=all"))
    assert svc.runner is not None
    _, res, _ = await svc.execute(probe(port), 20000, None)
    lines = res.stdout.strip().splitlines()
    assert seen == [], lines  # nothing reached the host's service
    fetches = [line for line in lines if line.startswith("fetch")]
    assert len(fetches) == 4, res.stdout + res.stderr
    if egress_capable(svc.runner.mode, svc.runner.namespaces):
        assert res.reached == ()  # refused by our proxy: nothing came from outside
        for line in fetches:
            assert line.startswith("fetch 403 sidekick egress: refused"), line
            assert "CODE_NETWORK=all" in line
    else:  # no network namespace to hold the rule: the network is off, not wide open
        assert not svc.runner.network
        assert fetches == ["fetch error FailedToOpenSocket"] * 4, lines
        assert "connect EACCES" in lines
    assert "connected" not in lines  # no direct route: only the proxy leads out
    assert "host port in /proc/net/tcp: false" in lines


@pytest.mark.parametrize("mode", STRONG_MODES)
async def test_allowed_addresses_are_reached_through_the_proxy(
    env: Env, mode: str, web: tuple[int, list[bytes]]
) -> None:
    # The test's service stands in for a public address: allowed by the policy, and
    # reached through the proxy (the code's own loopback has nothing on that port).
    port, seen = web
    svc = in_mode(env, mode, Policy(allow_private=False, extra_allowed={LOOPBACK}))
    assert svc.runner is not None
    if not egress_capable(svc.runner.mode, svc.runner.namespaces):
        pytest.skip("no network namespace in this mode")
    code = f'const r = await fetch("http://127.0.0.1:{port}/ok?x=1"); console.log(await r.text())'
    _, res, cat = await svc.execute(code, 20000, None)
    assert cat is None and res.stdout.strip() == "host-only", res.stdout + res.stderr
    assert seen == [b"GET /ok?x=1 HTTP/1.1\r\n"]
    assert res.reached == ("127.0.0.1",)  # what it printed came from there: outside content

    # The same run without the network (a turn that read outside content): nothing leaves.
    _, off, _ = await svc.execute(code, 20000, None, network=False)
    assert off.reached == () and "host-only" not in off.stdout and len(seen) == 1


@pytest.mark.parametrize("mode", STRONG_MODES)
async def test_code_reaches_no_host_unix_socket(env: Env, mode: str) -> None:
    """A Unix socket of the host, open to every account (as /dev/log or a 0666 API
    socket), is out of reach whatever the mode: only the egress proxy's socket is."""
    folder = Path(tempfile.mkdtemp(prefix="sidekick-test-sock-"))
    os.chmod(folder, 0o755)
    accepted: list[int] = []

    def on_connect(_r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        accepted.append(1)
        w.close()

    server = await asyncio.start_unix_server(on_connect, folder / "api.sock")
    os.chmod(folder / "api.sock", 0o666)
    svc = in_mode(env, mode, Policy(allow_private=False, opens="CODE_NETWORK=all"))
    code = f"""
try {{ await Bun.connect({{ unix: "{folder}/api.sock", socket: {{ data() {{}} }} }});
  console.log("connected"); }} catch (e) {{ console.log("unix " + e.code); }}
const r = await fetch("http://localhost/", {{ unix: "{folder}/api.sock" }}).catch((e) => e);
console.log("fetch " + (r.status || r.code));
"""
    try:
        _, res, _ = await svc.execute(code, 20000, None)
    finally:
        server.close()
        await server.wait_closed()
        shutil.rmtree(folder, ignore_errors=True)
    assert accepted == [], res.stdout
    lines = res.stdout.strip().splitlines()
    assert len(lines) == 2 and "connected" not in lines, res.stdout + res.stderr
    assert lines[0] in ("unix ENOENT", "unix EACCES"), lines


async def test_private_networks_on_opens_it(env: Env, web: tuple[int, list[bytes]]) -> None:
    port, seen = web
    svc = env.service(code_network="all")
    assert svc.runner is not None and svc.runner.egress is None
    assert "every address (CODE_NETWORK=all)" in svc.protects
    code = f'const r = await fetch("http://127.0.0.1:{port}/direct"); console.log(await r.text())'
    _, res, _ = await svc.execute(code, 20000, None)
    assert res.stdout.strip() == "host-only" and seen == [b"GET /direct HTTP/1.1\r\n"]


async def test_the_default_service_holds_code_to_public_addresses(env: Env) -> None:
    svc = env.service()
    assert svc.runner is not None
    if egress_capable(svc.runner.mode, svc.runner.namespaces):
        assert svc.runner.egress is not None
        assert svc.runner.egress.policy.opens == "CODE_NETWORK=all"
        assert "public addresses only" in svc.protects
    else:  # Landlock alone: the network is off, never every address
        assert svc.runner.egress is None and not svc.runner.network
        assert "OFF: the public-only rule needs a network namespace" in svc.protects


async def test_the_proxy_refuses_connect_to_local_spellings() -> None:
    proxy = EgressProxy(Policy(allow_private=False))
    folder = await proxy.open(None)
    try:
        for target in ("127.0.0.1:22", "[::ffff:127.0.0.1]:22", "[::7f00:1]:22", "10.0.0.1:443"):
            reader, writer = await asyncio.open_unix_connection(folder / "egress.sock")
            writer.write(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
            status = await asyncio.wait_for(reader.readline(), 30)
            writer.close()
            assert status.startswith(b"HTTP/1.1 403"), (target, status)
        reader, writer = await asyncio.open_unix_connection(folder / "egress.sock")
        writer.write(b"GET file:///etc/passwd HTTP/1.1\r\n\r\n")
        assert (await asyncio.wait_for(reader.readline(), 30)).startswith(b"HTTP/1.1 400")
        writer.close()
    finally:
        await proxy.close()
    assert not folder.exists()


@pytest.mark.parametrize("mode", STRONG_MODES)
async def test_the_launchers_command_line_shows_no_host_path(env: Env, mode: str) -> None:
    svc = env.in_mode(mode)
    assert svc.runner is not None
    code = """
const fs = require("node:fs");
for (const pid of fs.readdirSync("/proc").filter((p) => /^\\d+$/.test(p))) {
  try { console.log(fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").replaceAll("\\0", " ")); }
  catch (e) {}
}
"""
    _, res, _ = await svc.execute(code, 20000, None)
    if mode == "landlock-only":  # no PID namespace: only bun's own entry is readable
        assert "sidekick-code-" not in res.stdout.replace(str(svc.runner.bun.path), "")
        return
    assert res.stdout.strip(), res.stderr
    assert "sidekick-code-" not in res.stdout and "work.io" not in res.stdout, res.stdout


def idle_connections(path: Path, count: int) -> list[socket.socket]:
    """Connections that send nothing, as a run's stuck or idle code would hold them."""
    socks = []
    for _ in range(count):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(str(path))
        sock.setblocking(False)
        socks.append(sock)
    return socks


def still_open(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) != b""  # data would be an answer: not idle any more
    except BlockingIOError:
        return True
    except OSError:
        return False


async def test_one_runs_idle_connections_do_not_delay_another_runs_fetch() -> None:
    proxy = EgressProxy(Policy(allow_private=False))
    a, b = await proxy.open(None), await proxy.open(None)
    try:
        # More than a run's slots: run A's code holds every one of them, and more wait.
        held = idle_connections(a / "egress.sock", RUN_CONNECTIONS + 8)
        reader, writer = await asyncio.open_unix_connection(b / "egress.sock")
        writer.write(b"CONNECT 127.0.0.1:22 HTTP/1.1\r\nHost: x\r\n\r\n")
        status = await asyncio.wait_for(reader.readline(), 60)
        writer.close()
        # Run B was answered while every connection of run A still held its slot
        # (the proxy closes one only after HEAD_TIMEOUT_S without a request).
        assert status.startswith(b"HTTP/1.1 403"), status
        assert all(still_open(sock) for sock in held)
        await proxy.release(a)  # the run ended: its connections go with it
        assert not a.exists()
        for sock in held:
            await until(lambda sock=sock: not still_open(sock), "the socket closed")  # type: ignore[misc]
            sock.close()
    finally:
        await proxy.close()
    assert not b.exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="trying another account needs root")
async def test_a_runs_socket_is_closed_to_other_accounts() -> None:
    proxy = EgressProxy(Policy(allow_private=False))
    uid = 61999  # as the runner gives a run when root
    folder = await proxy.open(uid)
    try:
        for item, mode in ((folder, 0o700), (folder / "egress.sock", 0o600)):
            st = os.stat(item)
            assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (uid, mode), item
        # The run's uid reaches it; another local account (nobody) does not.
        results = [await asyncio.to_thread(connect_as, who, folder) for who in (uid, 65534)]
        assert results == ["ok", "EACCES"]
    finally:
        await proxy.close()


def connect_as(uid: int, folder: Path) -> str:
    pid = os.fork()
    if pid == 0:  # the child: become `uid`, try the socket, report by exit code
        code = 2
        try:
            os.setgroups([])
            os.setresgid(uid, uid, uid)
            os.setresuid(uid, uid, uid)
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.connect(str(folder / "egress.sock"))
            code = 0
        except PermissionError:
            code = 1
        finally:
            os._exit(code)
    status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    return {0: "ok", 1: "EACCES"}.get(status, f"exit {status}")
