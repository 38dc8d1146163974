"""One GET that returns (response, JSON body) or a BackendError naming the URL."""

from __future__ import annotations

from typing import Any

import httpx

from tools.search.hits import BackendError


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
            f"{label} did not answer within {limit_s:g} s (timeout at {url}).",
            "check that the service is up and reachable from the bot; try again later.",
        ) from None
    except httpx.HTTPError as exc:
        raise BackendError(
            f"cannot reach {label} at {url} ({type(exc).__name__}).",
            "check the URL setting and that the service is running and reachable from the bot.",
        ) from None
    try:
        body: Any = resp.json()
    except ValueError:
        body = None
    return resp, body
