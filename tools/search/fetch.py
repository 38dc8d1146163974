"""One GET that returns (response, JSON body) or a BackendError naming the URL."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

from tools.search.hits import BackendError


def shown(url: str) -> str:
    """The URL without user:password@ (an instance behind basic auth), for messages and logs."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))


async def get_json(
    http: httpx.AsyncClient,
    url: str,
    *,
    params: dict[str, Any],
    headers: dict[str, str] | None = None,
    limit_s: float,
    label: str,
) -> tuple[httpx.Response, Any]:
    """Transport failures become BackendError; the caller judges the status code."""
    try:
        resp = await http.get(
            url,
            params=params,
            headers=headers,
            timeout=httpx.Timeout(limit_s, connect=min(limit_s, 5.0)),
        )
    except httpx.TimeoutException:
        raise BackendError(
            f"{label} did not answer within {limit_s:g} s (timeout at {shown(url)}).",
            "check that the service is up and reachable from the bot; try again later.",
        ) from None
    except httpx.HTTPError as exc:
        raise BackendError(
            f"cannot reach {label} at {shown(url)} ({type(exc).__name__}).",
            "check the URL setting and that the service is running and reachable from the bot.",
        ) from None
    try:
        body: Any = resp.json()
    except ValueError:
        body = None
    return resp, body
