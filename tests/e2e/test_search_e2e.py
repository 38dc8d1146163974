"""Search through Telegram: the model calls `search`, a fake SearXNG/Brave answers."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.e2e.conftest import OWNER, TG
from tests.fakes.openai_server import Calls, Text
from tests.fakes.search_server import FakeSearch, Reply, fixture
from tools.effects import OUTSIDE_MARK
from tools.search import brave

KEY = "BSA-e2e-secret-key-42"


@pytest.fixture
async def searx(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeSearch]:
    fake = await FakeSearch().start()
    fake.serve("/search", Reply(fixture("searxng_web.json")))
    fake.serve("/res/v1/web/search", Reply(fixture("brave_web.json")))
    monkeypatch.setattr(brave, "API_URL", fake.root + "/res/v1")
    yield fake
    await fake.stop()


def tool_results(body: dict[str, Any]) -> list[str]:
    """The results past their first line, which marks them as outside content."""
    out = []
    for m in body["messages"]:
        if m["role"] == "tool":
            note, _, result = m["content"].partition("\n")
            assert note.startswith(f"{OUTSIDE_MARK}search results for ")
            out.append(result)
    return out


async def test_search_answer_reaches_the_user(make_tg: Any, searx: FakeSearch) -> None:
    tg: TG = await make_tg(searxng_url=searx.root)
    tg.llm.add(
        Calls([("search", {"query": "harbour tides", "max_results": 2})]),
        Text("High water is at 06:12 (tides.example.org)."),
    )
    await tg.send(OWNER, "when is high tide in the harbour?")
    assert (await tg.reply(OWNER)).text == "High water is at 06:12 (tides.example.org)."
    result = json.loads(tool_results(tg.llm.requests[1])[0])
    assert result["backend"] == "searxng" and "never instructions" in result["notice"]
    assert result["results"] == [
        {
            "title": "Harbour tide tables & times",
            "url": "https://tides.example.org/harbour",
            "snippet": "High water at 06:12 and 18:40 — low water at 00:05.",
        },
        {
            "title": "Tide - Wiki",
            "url": "https://wiki.example.org/Tide",
            "snippet": result["results"][1]["snippet"],
            "date": "2025-03-04",
        },
    ]
    assert searx.requests[0].params["format"] == "json"


async def test_second_identical_search_comes_from_the_cache(
    make_tg: Any, searx: FakeSearch
) -> None:
    tg: TG = await make_tg(searxng_url=searx.root)
    for _ in range(2):
        tg.llm.add(Calls([("search", {"query": "harbour tides"})]), Text("06:12"))
        await tg.send(OWNER, "high tide?")
        assert (await tg.reply(OWNER)).text == "06:12"
    assert searx.count("/search") == 1
    assert json.loads(tool_results(tg.llm.requests[-1])[-1])["cached"] is True


async def test_fallback_to_brave_when_searxng_refuses_json(make_tg: Any, searx: FakeSearch) -> None:
    searx.serve("/search", Reply("<html>Forbidden</html>", status=403))
    tg: TG = await make_tg(searxng_url=searx.root, brave_api_key=KEY)
    tg.llm.add(Calls([("search", {"query": "sourdough starter"})]), Text("Feed it daily."))
    await tg.send(OWNER, "how do I keep a starter?")
    assert (await tg.reply(OWNER)).text == "Feed it daily."
    result = tool_results(tg.llm.requests[1])[0]
    assert json.loads(result)["backend"] == "brave" and "search.formats" in result
    assert KEY not in result


async def test_unconfigured_search_is_not_offered(tg: TG) -> None:
    """Without a backend the model is not shown search at all; /tools says how to enable it."""
    tg.llm.add(Text("I cannot search the web here."))
    await tg.send(OWNER, "what's in the news?")
    assert (await tg.reply(OWNER)).text == "I cannot search the web here."
    offered = [t["function"]["name"] for t in tg.llm.requests[0]["tools"]]
    assert "search" not in offered and "memory" in offered
    system = tg.llm.requests[0]["messages"][0]["content"]
    assert "- search:" not in system and "- memory:" in system
    await tg.send(OWNER, "/tools")
    tools = (await tg.reply(OWNER)).text or ""
    assert "search" in tools and "SEARXNG_URL" in tools and "BRAVE_API_KEY" in tools
