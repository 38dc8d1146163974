"""Web and news search: the `search` tool (SearXNG or Brave, with fallback and a cache), its
settings, and the doctor's one real query per configured backend."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tools.feature import Feature, Host, Setup
from tools.search.settings import SearchSettings

if TYPE_CHECKING:
    from tools.base import CheckResult


async def check(host: Host) -> list[CheckResult]:
    from tools.search.doctor import check_search

    return await check_search(host.deps.settings_for(SearchSettings), host.deps.http)


def setup() -> Setup:
    from tools.search.tool import TOOL

    return Setup(tools=(TOOL,), doctor=check)


FEATURE = Feature(name="search", settings=SearchSettings, setup=setup)
