"""SearXNG's JSON API: GET {SEARXNG_URL}/search?format=json."""

from __future__ import annotations

from typing import Any

import httpx

from tools.search.fetch import get_json, shown
from tools.search.hits import BackendError, Hit, Query, dedupe, hit_from

SAFESEARCH_MODERATE = 1


def base_url(configured: str) -> str:
    """Accept the instance root with or without a trailing /search or slash."""
    return configured.strip().rstrip("/").removesuffix("/search")


class SearxngBackend:
    name = "searxng"

    def __init__(self, http: httpx.AsyncClient, url: str, *, timeout: float = 15.0) -> None:
        self.http = http
        self.url = base_url(url)
        self.timeout = timeout
        self.label = f"SearXNG ({shown(self.url)})"

    async def search(self, query: Query) -> list[Hit]:
        if not self.url.startswith(("http://", "https://")):
            raise BackendError(
                f"SEARXNG_URL {shown(self.url)!r} is not an http(s) URL.",
                "set SEARXNG_URL to the instance root, e.g. http://searxng:8080.",
            )
        params: dict[str, Any] = {
            "q": query.text,
            "format": "json",
            "categories": "news" if query.kind == "news" else "general",
            "safesearch": SAFESEARCH_MODERATE,
        }
        if query.language:
            params["language"] = query.language
        if query.time_range:
            params["time_range"] = query.time_range
        endpoint = f"{self.url}/search"
        resp, body = await get_json(
            self.http, endpoint, params=params, limit_s=self.timeout, label="SearXNG"
        )
        endpoint = shown(endpoint)
        _raise_for_status(resp, endpoint)
        if not isinstance(body, dict) or not isinstance(body.get("results"), list):
            raise BackendError(
                f"SearXNG at {endpoint} did not answer with search JSON "
                f"(HTTP {resp.status_code}, {resp.headers.get('content-type', '?')}).",
                "SEARXNG_URL must be the SearXNG instance root, e.g. http://searxng:8080.",
            )
        found = (hit_from(raw, "content", ("publishedDate",)) for raw in body["results"])
        hits = dedupe([h for h in found if h], query.max_results)
        if not hits:
            failed = _unresponsive(body.get("unresponsive_engines"))
            if failed:
                raise BackendError(
                    f"SearXNG found nothing because its engines failed: {failed}.",
                    "check those engines in SearXNG (blocked, CAPTCHA or down); "
                    "enable others in settings.yml.",
                )
        return hits


def _raise_for_status(resp: httpx.Response, endpoint: str) -> None:
    code = resp.status_code
    if code == 200:
        return
    if code == 403:
        raise BackendError(
            f"SearXNG at {endpoint} refused the JSON format (HTTP 403).",
            "add json to search.formats in SearXNG's settings.yml "
            "(formats: [html, json]) and restart SearXNG.",
        )
    if code == 429:
        raise BackendError(
            f"SearXNG at {endpoint} rate-limited the bot (HTTP 429): its bot limiter is on.",
            "set server.limiter: false in SearXNG's settings.yml for a private instance "
            "(or pass the bot's address in limiter.toml) and restart SearXNG.",
        )
    if code == 404:
        raise BackendError(
            f"SearXNG at {endpoint} answered HTTP 404.",
            "SEARXNG_URL must be the SearXNG instance root, e.g. http://searxng:8080.",
        )
    raise BackendError(
        f"SearXNG at {endpoint} failed with HTTP {code}.",
        "look at the SearXNG logs; try again later.",
    )


def _unresponsive(raw: object) -> str:
    """[["engine", "reason"], ...] → "engine (reason), ..."."""
    items = [i for i in raw if isinstance(i, list | tuple) and i] if isinstance(raw, list) else []
    return ", ".join(f"{i[0]} ({i[1]})" if len(i) > 1 and i[1] else str(i[0]) for i in items)
