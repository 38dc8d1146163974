"""An endpoint's answer read with a byte cap, while it streams: httpx's `post` reads the whole
body first (200 MB of junk grew the process by 590 MB). An error answer is read only as far as
its log line needs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

ERROR_BYTES = 4096  # of an answer with an error status: enough for the log's 200 characters


class TooLarge(Exception):
    """The body (or its Content-Length) went past the cap; reading stopped there."""


@dataclass(frozen=True)
class Answer:
    status_code: int
    headers: httpx.Headers
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", "replace")


async def post(http: httpx.AsyncClient, url: str, cap: int, **kwargs: Any) -> Answer:
    """POST and read at most `cap` bytes of a successful answer (TooLarge past it)."""
    async with http.stream("POST", url, **kwargs) as resp:
        limit = cap if resp.status_code < 400 else ERROR_BYTES
        declared = resp.headers.get("content-length", "")
        if resp.status_code < 400 and declared.isascii() and declared.isdigit():
            if int(declared) > cap:
                raise TooLarge(f"{declared} bytes declared")
        body = bytearray()
        async for chunk in resp.aiter_bytes():
            body += chunk
            if len(body) > limit:
                if resp.status_code < 400:
                    raise TooLarge(f"more than {cap} bytes")
                del body[limit:]
                break
        return Answer(resp.status_code, resp.headers, bytes(body))
