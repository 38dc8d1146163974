"""GET one URL: redirects followed by hand (each hop checked), body read up to a cap."""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urljoin

import httpx

from tools.base import ToolError
from tools.fetch.policy import Policy

MAX_REDIRECTS = 5
MAX_BYTES = 3_000_000
TIMEOUT = httpx.Timeout(20.0, connect=10.0)
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


async def get(http: httpx.AsyncClient, url: str, policy: Policy) -> Page:
    current = url
    for _ in range(MAX_REDIRECTS + 1):
        await policy.check(current)
        request = http.build_request("GET", current, headers=HEADERS, timeout=TIMEOUT)
        try:
            resp = await http.send(request, follow_redirects=False, stream=True)
        except httpx.TimeoutException:
            raise ToolError(f"{current[:200]} did not answer in time") from None
        except httpx.HTTPError as exc:
            raise ToolError(f"cannot fetch {current[:200]} ({type(exc).__name__})") from None
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
