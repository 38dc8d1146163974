"""The way out for model code's network: an HTTP proxy on a Unix socket that applies
web_fetch's address rule (tools/fetch/policy.py: public addresses only, checked after DNS
and connected to as checked) unless CODE_PRIVATE_NETWORKS=on.

The run gets a network namespace of its own holding only loopback, so nothing it opens
leaves the sandbox directly; egress.js, preloaded into bun, listens on the namespace's
127.0.0.1:3128 and passes each connection to this socket, and HTTP_PROXY / HTTPS_PROXY
point bun's fetch there. CONNECT (https) and absolute-form requests (http) are served;
anything else gets an error status and a one-line reason the code can print.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

from tools.base import ToolError
from tools.code.tree import remove_tree
from tools.fetch.policy import IP, Policy

log = logging.getLogger(__name__)

PROXY_PORT = 3128  # inside the run's own network namespace
RELAY_JS = Path(__file__).with_name("egress.js")
SOCKET_NAME = "egress.sock"
HEAD_LIMIT = 64 * 1024
HEAD_TIMEOUT_S = 30.0
CONNECT_TIMEOUT_S = 10.0
MAX_CONNECTIONS = 64  # at once, over every run of the runner
CHUNK = 65536
AFTER_CLOSE_S = 5.0


class EgressProxy:
    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.folder: Path | None = None
        self._server: asyncio.AbstractServer | None = None
        self._lock = asyncio.Lock()
        self._slots = asyncio.Semaphore(MAX_CONNECTIONS)
        self._tasks: set[asyncio.Task[None]] = set()

    async def start(self) -> Path:
        """The folder holding the socket and egress.js (bound into each sandbox), started
        on first use."""
        async with self._lock:
            if self._server is None or self.folder is None:
                folder = Path(tempfile.mkdtemp(prefix="sidekick-egress-"))
                os.chmod(folder, 0o755)  # the run (maybe a throwaway uid) lists and reads it
                path = folder / SOCKET_NAME
                self._server = await asyncio.start_unix_server(self._handle, path, limit=HEAD_LIMIT)
                os.chmod(path, 0o666)
                # Beside the socket, so a run reads the relay from a folder holding nothing else.
                shutil.copyfile(RELAY_JS, folder / RELAY_JS.name)
                os.chmod(folder / RELAY_JS.name, 0o644)
                self.folder = folder
            return self.folder

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            await self._server.wait_closed()
            self._server = None
        if self.folder is not None:
            remove_tree(self.folder)
            self.folder = None

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        try:
            async with self._slots:
                await self._serve(reader, writer)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            pass  # the run went away, or sent no proxy request in time
        except Exception:  # one connection's failure never stops the proxy
            log.exception("egress proxy: a connection failed")
        finally:
            self._tasks.discard(task)
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
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
    outward = asyncio.create_task(_pipe(reader, up_writer))
    inward = asyncio.create_task(_pipe(up_reader, writer))
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


async def _pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    try:
        while chunk := await src.read(CHUNK):
            dst.write(chunk)
            await dst.drain()
        if dst.can_write_eof():
            dst.write_eof()
    except OSError:
        dst.close()


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
