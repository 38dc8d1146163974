"""httpcore's network streams with a cheaper idle-connection check.

Before and after every request httpcore's pool asks each idle keep-alive connection whether
its socket has turned readable (a server that hung up). anyio answers that question by
building a dict of all the stream's attributes to fetch the raw socket, ~10 us a connection,
so a pool of a few idle connections cost more per model call than our own request set-up.
Here the socket is looked up once per connection; the check itself is httpcore's.
"""

# httpcore's stream and backend interface takes `timeout` arguments; ours pass them on.
# ruff: noqa: ASYNC109

from __future__ import annotations

import ssl
from collections.abc import Iterable
from typing import Any

import httpcore
import httpx
from httpcore._utils import is_socket_readable

SocketOption = (
    tuple[int, int, int] | tuple[int, int, bytes | bytearray] | tuple[int, int, None, int]
)


class _Stream(httpcore.AsyncNetworkStream):
    def __init__(self, inner: httpcore.AsyncNetworkStream) -> None:
        self._inner = inner
        self._socket = inner.get_extra_info("socket")

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return await self._inner.read(max_bytes, timeout)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        await self._inner.write(buffer, timeout)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.AsyncNetworkStream:
        return _Stream(await self._inner.start_tls(ssl_context, server_hostname, timeout))

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable":
            return is_socket_readable(self._socket)
        return self._inner.get_extra_info(info)


class _Backend(httpcore.AsyncNetworkBackend):
    def __init__(self, inner: httpcore.AsyncNetworkBackend) -> None:
        self._inner = inner

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        stream = await self._inner.connect_tcp(
            host, port, timeout=timeout, local_address=local_address, socket_options=socket_options
        )
        return _Stream(stream)

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[SocketOption] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        stream = await self._inner.connect_unix_socket(
            path, timeout=timeout, socket_options=socket_options
        )
        return _Stream(stream)

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def cheap_idle_checks(client: httpx.AsyncClient) -> None:
    """Give the client's own connection pool (not a proxy's) the streams above. httpx has
    no public way to pass a network backend, so this reaches for its pool; an httpx or
    httpcore that keeps it elsewhere is left as it is (slower, not wrong)."""
    pool = getattr(getattr(client, "_transport", None), "_pool", None)
    if type(pool) is not httpcore.AsyncConnectionPool:
        return
    backend = getattr(pool, "_network_backend", None)
    if isinstance(backend, httpcore.AsyncNetworkBackend) and not isinstance(backend, _Backend):
        pool._network_backend = _Backend(backend)
