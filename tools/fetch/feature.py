"""web_fetch: the readable text of a few URLs, an extension tool (shown while it fits the
tool budget, else found through tool_search), with FETCH_PRIVATE_NETWORKS."""

from __future__ import annotations

from tools.feature import Feature, Setup
from tools.fetch.settings import FetchSettings


def setup() -> Setup:
    from tools.fetch.tool import TOOL

    return Setup(tools=(TOOL,))


FEATURE = Feature(name="fetch", settings=FetchSettings, setup=setup)
