"""Which URLs may be fetched: http(s) only, and no loopback/private/link-local targets
(after DNS resolution, on every redirect) unless FETCH_PRIVATE_NETWORKS=on."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from tools.base import ToolError

IP = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], Awaitable[list[IP]]]


async def system_resolve(host: str, port: int) -> list[IP]:
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [ipaddress.ip_address(info[4][0]) for info in infos]


# IPv6 ranges that carry an IPv4 address in their last 32 bits: IPv4-compatible (::/96),
# SIIT's IPv4-translated (::ffff:0:0/96) and well-known NAT64 (64:ff9b::/96). A host
# stack or a NAT64 gateway may route them to that IPv4 address, so it is what we judge.
_EMBEDS_V4_LOW = (
    ipaddress.IPv6Network("::/96"),
    ipaddress.IPv6Network("::ffff:0:0:0/96"),
    ipaddress.IPv6Network("64:ff9b::/96"),
)
# Never public whatever they embed: local-use NAT64 (RFC 8215) and deprecated site-local.
_NEVER_PUBLIC = (ipaddress.IPv6Network("64:ff9b:1::/48"), ipaddress.IPv6Network("fec0::/10"))


def unwrap(ip: IP) -> IP:
    """The IPv4 address an IPv6 address stands for (mapped, compatible, translated, NAT64,
    6to4), else the address itself."""
    if isinstance(ip, ipaddress.IPv4Address):
        return ip
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip.sixtofour is not None:
        return ip.sixtofour
    if any(ip in net for net in _EMBEDS_V4_LOW) and int(ip) & 0xFFFFFFFF > 1:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip


def is_public(ip: IP) -> bool:
    if isinstance(ip, ipaddress.IPv6Address) and any(ip in net for net in _NEVER_PUBLIC):
        return False
    if ip.is_multicast or not ip.is_global:
        return False
    inner = unwrap(ip)
    return inner is ip or (inner.is_global and not inner.is_multicast)


@dataclass
class Policy:
    allow_private: bool = False
    resolve: Resolver = system_resolve
    # For tests: addresses allowed even when private networks are refused.
    extra_allowed: set[IP] = field(default_factory=set)
    opens: str = "FETCH_PRIVATE_NETWORKS=on"  # named in the refusal: the way to open it

    def allowed(self, ip: IP) -> bool:
        return self.allow_private or ip in self.extra_allowed or is_public(ip)

    async def check(self, url: str) -> list[IP]:
        """The addresses the URL's host may be reached at; ToolError when it may not be."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https"):
            raise ToolError(f"refused {url[:200]}: only http and https URLs can be fetched")
        host = parts.hostname
        if not host:
            raise ToolError(f"refused {url[:200]}: the URL has no host")
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            raise ToolError(f"refused {url[:200]}: bad port") from None
        try:
            addresses: list[IP] = [ipaddress.ip_address(host)]
        except ValueError:  # a name, not an address
            try:
                addresses = await self.resolve(host, port)
            except (OSError, UnicodeError):
                raise ToolError(f"cannot resolve host {host!r}") from None
        if not addresses:
            raise ToolError(f"cannot resolve host {host!r}")
        bad = [a for a in addresses if not self.allowed(a)]
        if bad:
            raise ToolError(
                f"refused {host}: it resolves to a private, loopback or link-local address "
                f"({bad[0]}); set {self.opens} to allow local addresses"
            )
        return addresses
