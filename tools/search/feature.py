"""Web and news search: the `search` tool (SearXNG or Brave, with fallback and a cache), its
settings, and the doctor's one real query per configured backend."""

from __future__ import annotations

from tools.feature import Feature, Host, Setup
from tools.search.settings import SearchSettings


def setup() -> Setup:
    from tools.base import CheckResult
    from tools.search.doctor import check_search
    from tools.search.tool import TOOL

    async def check(host: Host) -> list[CheckResult]:
        return await check_search(host.deps.settings_for(SearchSettings), host.deps.http)

    return Setup(tools=(TOOL,), doctor=check)


FEATURE = Feature(name="search", settings=SearchSettings, setup=setup)
