"""GET one URL: redirects followed by hand (each hop checked and pinned to the address
that was checked), body read up to a cap, all of it within one deadline."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit, urlunsplit

import httpx

from tools.base import ToolError
from tools.fetch.policy import IP, Policy

MAX_REDIRECTS = 5
MAX_BYTES = 3_000_000
TIMEOUT = httpx.Timeout(20.0, connect=10.0)
# httpx's timeouts are per read: a server that drips a byte now and then never trips
# them. This bounds the whole fetch (lookups, redirects, body) instead.
DEADLINE_S = 30.0
HEADERS = {
    "User-Agent": "Sidekick/0.1 (personal assistant; web_fetch)",
    "Accept": "text/html,application/xhtml+xml,text/plain,application/json;q=0.9,*/*;q=0.5",
}


@dataclass
class Page:
    url: str  # final URL after redirects
    status: int
    content_type: str
    body: bytes
    truncated: bool
    encoding: str | None


def _pinned_request(http: httpx.AsyncClient, url: str, ip: IP) -> httpx.Request:
    """A request to `url` that connects to the checked address `ip`, not to whatever a
    second DNS lookup would say (DNS rebinding); Host and TLS SNI keep the real name."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    default = 443 if parts.scheme == "https" else 80
    port = f":{parts.port}" if parts.port and parts.port != default else ""
    literal = f"[{ip}]" if ip.version == 6 else str(ip)
    target = urlunsplit((parts.scheme, f"{literal}{port}", parts.path or "/", parts.query, ""))
    shown_host = f"[{host}]" if ":" in host else host
    headers = {**HEADERS, "Host": f"{shown_host}{port}"}
    extensions = {"sni_hostname": host} if parts.scheme == "https" else {}
    return http.build_request(
        "GET", target, headers=headers, timeout=TIMEOUT, extensions=extensions
    )


async def _send_pinned(http: httpx.AsyncClient, url: str, addresses: list[IP]) -> httpx.Response:
    failure = "ConnectError"
    for ip in addresses[:4]:
        request = _pinned_request(http, url, ip)
        try:
            return await http.send(request, follow_redirects=False, stream=True)
        except httpx.ConnectError as exc:
            failure = type(exc).__name__  # the next address may answer
        except httpx.TimeoutException:
            raise ToolError(f"{url[:200]} did not answer in time") from None
        except httpx.HTTPError as exc:
            raise ToolError(f"cannot fetch {url[:200]} ({type(exc).__name__})") from None
    raise ToolError(f"cannot fetch {url[:200]} ({failure})")


async def get(
    http: httpx.AsyncClient, url: str, policy: Policy, deadline_s: float = DEADLINE_S
) -> Page:
    try:
        async with asyncio.timeout(deadline_s):
            return await _get(http, url, policy)
    except TimeoutError:
        raise ToolError(
            f"{url[:200]} was still loading after {deadline_s:g} s in all; stopped"
        ) from None


async def _get(http: httpx.AsyncClient, url: str, policy: Policy) -> Page:
    current = url
    for _ in range(MAX_REDIRECTS + 1):
        addresses = await policy.check(current)
        resp = await _send_pinned(http, current, addresses)
        try:
            if resp.is_redirect:
                location = resp.headers.get("location")
                if not location:
                    raise ToolError(f"{current[:200]} redirected without a Location")
                current = urljoin(current, location)
                continue
            body = bytearray()
            truncated = False
            async for chunk in resp.aiter_bytes():
                body.extend(chunk)
                if len(body) > MAX_BYTES:
                    del body[MAX_BYTES:]
                    truncated = True
                    break
            return Page(
                url=current,
                status=resp.status_code,
                content_type=resp.headers.get("content-type", "").split(";")[0].strip().lower(),
                body=bytes(body),
                truncated=truncated,
                encoding=resp.charset_encoding,
            )
        except httpx.HTTPError as exc:
            raise ToolError(f"reading {current[:200]} failed ({type(exc).__name__})") from None
        finally:
            await resp.aclose()
    raise ToolError(f"{url[:200]}: more than {MAX_REDIRECTS} redirects")
