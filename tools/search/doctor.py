"""`sidekick doctor` for search: which backends are configured, and one real query each."""

from __future__ import annotations

import httpx

from tools.base import CheckResult
from tools.search.brave import RATE_PER_SECOND, plan_rate
from tools.search.hits import BackendError, Query
from tools.search.settings import SearchSettings
from tools.search.tool import make_backends

TEST_QUERY = "weather"


async def check_search(s: SearchSettings, http: httpx.AsyncClient) -> list[CheckResult]:
    backends = make_backends(s, http, plan_rate(RATE_PER_SECOND))
    if not backends:
        off = "not configured (optional): set SEARXNG_URL or BRAVE_API_KEY to enable it"
        return [CheckResult("search", True, off)]
    out: list[CheckResult] = []
    for i, backend in enumerate(backends):
        role = "primary" if i == 0 else "fallback"
        name = f"search: {backend.name} ({role})"
        try:
            hits = await backend.search(Query(TEST_QUERY, max_results=3))
        except BackendError as exc:
            out.append(CheckResult(name, False, exc.detail, exc.fix))
            continue
        detail = f"{backend.label}: {len(hits)} results for {TEST_QUERY!r}"
        fix = "the backend answered but found nothing: check its engines (SearXNG) or plan"
        out.append(CheckResult(name, bool(hits), detail, fix))
    return out
