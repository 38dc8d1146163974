"""The Brave Search API: /web/search and /news/search with X-Subscription-Token."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

import httpx
from aiolimiter import AsyncLimiter
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type, stop_after_attempt

from tools.search.fetch import get_json
from tools.search.hits import BackendError, Hit, Query, dedupe, hit_from

# The Brave Search API; a constant (tests point it at a local fake by patching it).
API_URL = "https://api.search.brave.com/res/v1"
# Requests per second: the free plan's rate, which every paid plan also allows; calls are
# spaced to it so a burst of searches is not answered with 429.
RATE_PER_SECOND = 1.0
FRESHNESS = {"day": "pd", "week": "pw", "month": "pm", "year": "py"}
MAX_COUNT = 20


def plan_rate(rate_per_second: float) -> AsyncLimiter:
    """One call every 1/rate seconds (Brave's plans allow N requests per second, no burst)."""
    return AsyncLimiter(1, 1.0 / rate_per_second)


class RateLimited(BackendError):
    """A 429 worth one more try after `wait` seconds."""

    def __init__(self, detail: str, fix: str, wait: float) -> None:
        super().__init__(detail, fix)
        self.wait = wait


def _told_wait(state: RetryCallState) -> float:
    exc = state.outcome.exception() if state.outcome else None
    return exc.wait if isinstance(exc, RateLimited) else 0.0


@dataclass(eq=False)  # compared and hashed by identity, as a service is
class BraveBackend:
    name = "brave"
    label = "Brave Search"

    http: httpx.AsyncClient
    _key: str = field(repr=False)
    url: str
    limiter: AsyncLimiter
    _: KW_ONLY
    timeout: float = 15.0
    max_wait: float = 5.0  # longest 429 wait we sit through before giving up
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep

    def __post_init__(self) -> None:
        self.url = self.url.rstrip("/")

    async def search(self, query: Query) -> list[Hit]:
        endpoint = f"{self.url}/{'news' if query.kind == 'news' else 'web'}/search"
        params: dict[str, Any] = {
            "q": query.text,
            "count": min(query.max_results, MAX_COUNT),
            "safesearch": "moderate",
        }
        if query.language:
            params["search_lang"] = query.language.split("-")[0].lower()
        if query.time_range:
            params["freshness"] = FRESHNESS[query.time_range]
        headers = {"X-Subscription-Token": self._key, "Accept": "application/json"}
        # A 429 is tried once more after the wait the server names, when that is short.
        retrying = AsyncRetrying(
            stop=stop_after_attempt(2),
            retry=retry_if_exception_type(RateLimited),
            wait=_told_wait,
            sleep=self.sleep,
            reraise=True,
        )
        async for attempt in retrying:
            with attempt:
                resp, body = await self._get(endpoint, params, headers)
        self._raise_for_status(resp, body)
        if not isinstance(body, dict):
            raise BackendError(
                f"Brave Search at {endpoint} did not answer with JSON (HTTP {resp.status_code}).",
                "a proxy or captive portal may stand between this host and the Brave API.",
            )
        # News results sit flat in "results"; web results in "web.results".
        holder = body if query.kind == "news" else body.get("web") or {}
        raw = holder.get("results") if isinstance(holder, dict) else None
        items = raw if isinstance(raw, list) else []
        hits = (hit_from(raw, "description", ("page_age", "age")) for raw in items)
        return dedupe([h for h in hits if h], query.max_results)

    async def _get(
        self, endpoint: str, params: dict[str, Any], headers: dict[str, str]
    ) -> tuple[httpx.Response, Any]:
        async with self.limiter:
            resp, body = await get_json(
                self.http,
                endpoint,
                params=params,
                headers=headers,
                limit_s=self.timeout,
                label="Brave Search",
            )
        if resp.status_code == 429:
            wait = self._rate_limited(resp, body)
            fault = (
                f"Brave Search is rate-limiting ({self._detail(body)}); "
                f"it allows the next request in {wait:g} s.",
                "wait a moment, or check the plan's monthly quota in the Brave dashboard.",
            )
            if wait > self.max_wait:
                raise BackendError(*fault)
            raise RateLimited(*fault, wait)
        return resp, body

    def _rate_limited(self, resp: httpx.Response, body: Any) -> float:
        """Seconds to wait (Retry-After or X-RateLimit-Reset); raises when the month is used up."""
        remaining = _numbers(resp.headers.get("x-ratelimit-remaining"))
        reset = _numbers(resp.headers.get("x-ratelimit-reset"))
        err = body.get("error") if isinstance(body, dict) else None
        meta = err.get("meta") if isinstance(err, dict) else None
        meta = meta if isinstance(meta, dict) else {}
        quota_limit, quota_used = meta.get("quota_limit"), meta.get("quota_current")
        month_done = (len(remaining) > 1 and remaining[-1] <= 0) or (
            isinstance(quota_limit, int | float)
            and isinstance(quota_used, int | float)
            and quota_used >= quota_limit
        )
        if month_done:
            days = f" (resets in {reset[-1] / 86400:.1f} days)" if len(reset) > 1 else ""
            raise BackendError(
                f"the Brave Search plan's monthly quota is used up{days}.",
                "wait for the reset, upgrade the plan, or also set SEARXNG_URL as a fallback.",
            )
        retry_after = _numbers(resp.headers.get("retry-after"))
        if retry_after:
            return max(retry_after[0], 0.0)
        if reset:
            return max(reset[0], 0.0)
        return self.limiter.time_period / self.limiter.max_rate

    def _raise_for_status(self, resp: httpx.Response, body: Any) -> None:
        code = resp.status_code
        if code == 200:
            return
        detail = self._detail(body)
        if code in (401, 403):
            raise BackendError(
                f"Brave Search rejected the API key (HTTP {code}: {detail}).",
                "check BRAVE_API_KEY against the key in your Brave Search API dashboard.",
            )
        if code in (400, 422):
            raise BackendError(
                f"Brave Search rejected the request (HTTP {code}: {detail}).",
                "rephrase the query or drop the language/time_range options.",
            )
        raise BackendError(f"Brave Search failed with HTTP {code} ({detail}).", "try again later.")

    def _detail(self, body: Any) -> str:
        err = body.get("error") if isinstance(body, dict) else None
        detail = err.get("detail") or err.get("code") if isinstance(err, dict) else None
        out = str(detail)[:200] if detail else "no details"
        return out.replace(self._key, "[key]") if self._key else out


def _numbers(header: str | None) -> list[float]:
    """ "1, 1419704" → [1.0, 1419704.0]; junk is skipped."""
    out = []
    for part in (header or "").split(","):
        try:
            out.append(float(part.strip()))
        except ValueError:
            continue
    return out
