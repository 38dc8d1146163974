"""Web and news search: the `search` tool (SearXNG or Brave, with fallback and a cache), its
settings, and the doctor's one real query per configured backend."""

from __future__ import annotations

from tools.base import CheckResult
from tools.feature import Feature, Host
from tools.search.doctor import check_search
from tools.search.settings import SearchSettings
from tools.search.tool import TOOL


async def check(host: Host) -> list[CheckResult]:
    return await check_search(host.deps.settings_for(SearchSettings), host.deps.http)


FEATURE = Feature(name="search", settings=SearchSettings, tools=(TOOL,), doctor=check)
