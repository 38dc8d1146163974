"""The way out for model code's network: an HTTP proxy on a Unix socket that applies
web_fetch's address rule (tools/fetch/policy.py: public addresses only, checked after DNS
and connected to as checked) unless CODE_NETWORK=all. The run's loopback-only namespace
passes 127.0.0.1:3128 (HTTP_PROXY) on to this socket: forward.js preloaded into bun, or
under Landlock confine.serve_egress. CONNECT and absolute-form http requests are served;
anything else gets an error status and a one-line reason the code can print.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from urllib.parse import urlsplit

from tools.base import ToolError
from tools.code import confine
from tools.code.tree import remove_tree
from tools.fetch.policy import IP, Policy

log = logging.getLogger(__name__)

PROXY_PORT = confine.PROXY_PORT  # inside the run's own network namespace
RELAY_JS = Path(__file__).with_name("forward.js")
SOCKET_NAME = confine.EGRESS_SOCKET
HEAD_LIMIT = 64 * 1024
HEAD_TIMEOUT_S = 10.0  # a connection that sends no request is closed after this
CONNECT_TIMEOUT_S = 10.0
RUN_CONNECTIONS = 32  # at once, per run; more wait for a slot of that run
AFTER_CLOSE_S = 5.0


@dataclass
class _Gate:
    """One run's way out: its own socket, connection slots and open connections."""

    server: asyncio.AbstractServer | None = None
    slots: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(RUN_CONNECTIONS))
    tasks: set[asyncio.Task[None]] = field(default_factory=set)
    reached: list[str] = field(default_factory=list)  # hosts connected to, in order


class EgressProxy:
    """A socket per run (`open`), reachable only by that run's uid (and the bot), with
    slots of its own: one run's idle or many connections never delay another's, and no
    other local account can send through it. `release` ends the run's connections."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self._gates: dict[Path, _Gate] = {}

    async def open(self, uid: int | None) -> Path:
        """A new folder holding the run's socket and forward.js (bound into its sandbox),
        owned by `uid` (the run's throwaway uid when we are root) and closed to others."""
        folder = Path(tempfile.mkdtemp(prefix="sidekick-egress-"))  # 0700
        try:
            path = folder / SOCKET_NAME
            gate = self._gates[folder] = _Gate()
            gate.server = await asyncio.start_unix_server(
                partial(self._handle, gate), path, limit=HEAD_LIMIT
            )
            os.chmod(path, 0o600)
            # Beside the socket, so a run reads the relay from a folder holding nothing else.
            shutil.copyfile(RELAY_JS, folder / RELAY_JS.name)
            os.chmod(folder / RELAY_JS.name, 0o400)
            if uid is not None:
                for item in (folder, path, folder / RELAY_JS.name):
                    os.chown(item, uid, uid)
        except BaseException:
            await self.release(folder)
            raise
        return folder

    def reached(self, folder: Path) -> tuple[str, ...]:
        """The hosts the run behind `folder` connected to so far, each once."""
        gate = self._gates.get(folder)
        return tuple(dict.fromkeys(gate.reached)) if gate is not None else ()

    async def release(self, folder: Path) -> None:
        """Close the run's socket and every connection still open through it."""
        gate = self._gates.pop(folder, None)
        if gate is not None and gate.server is not None:
            gate.server.close()
            for task in list(gate.tasks):
                task.cancel()
            await asyncio.gather(*gate.tasks, return_exceptions=True)
            await gate.server.wait_closed()
        remove_tree(folder)

    async def close(self) -> None:
        for folder in list(self._gates):
            await self.release(folder)

    async def _handle(
        self, gate: _Gate, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        gate.tasks.add(task)
        try:
            async with gate.slots:
                await self._serve(reader, writer, gate.reached)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            pass  # the run went away, or sent no proxy request in time
        except asyncio.CancelledError:
            # The run ended (release). Ended here, not re-raised: asyncio's stream server
            # (3.11) logs a traceback for every handler task that ends cancelled.
            pass
        except Exception:  # one connection's failure never stops the proxy
            log.exception("egress proxy: a connection failed")
        finally:
            gate.tasks.discard(task)
            writer.close()

    async def _serve(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, reached: list[str]
    ) -> None:
        async with asyncio.timeout(HEAD_TIMEOUT_S):
            head = await reader.readuntil(b"\r\n\r\n")
        line, _, rest = head.partition(b"\r\n")
        try:
            method, target, version = line.decode("latin-1").split(" ")
        except ValueError:
            return await _refuse(writer, 400, "not an HTTP proxy request")
        if method == "CONNECT":
            host, _, port = target.rpartition(":")
            url, forward = f"https://{host}:{port}/", b""
        else:
            parts = urlsplit(target)
            if parts.scheme != "http" or not parts.hostname:
                return await _refuse(writer, 400, "only http:// URLs and CONNECT are proxied")
            url = target
            path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
            forward = f"{method} {path} {version}\r\n".encode("latin-1") + rest
        try:
            addresses = await self.policy.check(url)
            port_n = urlsplit(url).port or 80
        except (ToolError, ValueError) as exc:
            return await _refuse(writer, 403, str(exc))
        upstream = await _connect(addresses, port_n)
        if upstream is None:
            return await _refuse(writer, 502, f"cannot connect to {url[:200]}")
        up_reader, up_writer = upstream
        reached.append(urlsplit(url).hostname or url)
        try:
            if method == "CONNECT":
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
                await writer.drain()
            else:
                up_writer.write(forward)
            await _splice(reader, writer, up_reader, up_writer)
        finally:
            up_writer.close()


async def _connect(
    addresses: list[IP], port: int
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
    for ip in addresses[:4]:  # only the addresses the policy checked (no second lookup)
        with contextlib.suppress(OSError, TimeoutError):
            async with asyncio.timeout(CONNECT_TIMEOUT_S):
                return await asyncio.open_connection(str(ip), port)
    return None


async def _splice(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    up_reader: asyncio.StreamReader,
    up_writer: asyncio.StreamWriter,
) -> None:
    """Both directions until both end; once the run's side has ended (it exited, or
    was killed), the server gets a short while to finish, not forever."""
    outward = asyncio.create_task(confine.pipe(reader, up_writer))
    inward = asyncio.create_task(confine.pipe(up_reader, writer))
    try:
        await asyncio.wait({outward, inward}, return_when=asyncio.FIRST_COMPLETED)
        if outward.done():
            await asyncio.wait({inward}, timeout=AFTER_CLOSE_S)
        else:
            await outward
    finally:
        for task in (outward, inward):
            task.cancel()
        await asyncio.gather(outward, inward, return_exceptions=True)


async def _refuse(writer: asyncio.StreamWriter, status: int, why: str) -> None:
    reason = {400: "Bad Request", 403: "Forbidden", 502: "Bad Gateway"}[status]
    body = f"sidekick egress: {why}\n".encode()
    writer.write(
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
        + body
    )
    with contextlib.suppress(OSError):
        await writer.drain()
