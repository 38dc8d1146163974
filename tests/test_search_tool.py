"""The `search` tool: backend choice, fallback, cache, labelling, bad arguments, agent loop."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cachetools import TTLCache
from pydantic import ValidationError

from bot.agent.runner import Incoming
from bot.agent.toolexec import run_call
from bot.app import App, build_app
from bot.config import Settings
from bot.llm.client import LLMClient
from tests.conftest import make_settings
from tests.fakes.openai_server import Calls, FakeOpenAI, Text
from tests.fakes.search_server import FakeSearch, Reply, fixture
from tests.test_search_parts import FakeClock
from tools.base import RequestContext, RequestTools, Tool, ToolCall, ToolError
from tools.chat import LLMToolCall
from tools.effects import OUTSIDE_MARK
from tools.search import brave as brave_api
from tools.search import tool as search_tool_module
from tools.search.brave import plan_rate
from tools.search.tool import SearchParams, make_backends, make_service, tool_for

KEY = "BSA-secret-key-abcdef123"
WEB = "/res/v1/web/search"


@pytest.fixture
async def searx() -> AsyncIterator[FakeSearch]:
    fake = await FakeSearch().start()
    fake.serve("/search", Reply(fixture("searxng_web.json")))
    yield fake
    await fake.stop()


@pytest.fixture
async def brave(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeSearch]:
    fake = await FakeSearch().start()
    monkeypatch.setattr(brave_api, "API_URL", fake.root + "/res/v1")
    fake.serve(WEB, Reply(fixture("brave_web.json")))
    yield fake
    await fake.stop()


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient() as client:
        yield client


def both(tmp_path: Path, searx: FakeSearch, brave: FakeSearch, **extra: Any) -> Settings:
    return make_settings(
        tmp_path,
        searxng_url=searx.root,
        brave_api_key=KEY,
        **extra,
    )


def search_tool(
    settings: Settings, http: httpx.AsyncClient, clock: FakeClock | None = None
) -> Tool[SearchParams]:
    clock = clock or FakeClock()
    # The cache's time is the fake clock; the plan rate one no test waits for.
    cache: TTLCache[Any, dict[str, Any]] = TTLCache(256, 600, timer=clock)
    return tool_for(make_service(settings, http, limiter=plan_rate(1000.0), cache=cache))


def call() -> ToolCall:
    return ToolCall(RequestContext("r1", 1, 1, None), "call_1")


async def run(tool: Tool[SearchParams], **args: Any) -> Any:
    return await tool.run(SearchParams(**args), call())


async def test_not_configured_answers_how_to_configure(
    tmp_path: Path, http: httpx.AsyncClient
) -> None:
    tool = search_tool(make_settings(tmp_path), http)
    with pytest.raises(ToolError) as err:
        await run(tool, query="weather")
    assert "not configured" in str(err.value)
    assert "SEARXNG_URL" in str(err.value) and "BRAVE_API_KEY" in str(err.value)


def test_schema_has_the_documented_parameters(tmp_path: Path, http: httpx.AsyncClient) -> None:
    tool = tool_for(make_service(make_settings(tmp_path), http))
    params = tool.schema()["function"]["parameters"]
    assert tool.name == "search"
    # max_results is validated (1-10) but not shown: its tokens would sit in every prompt.
    assert set(params["properties"]) == {"query", "type", "language", "time_range"}
    assert params["required"] == ["query"]
    assert SearchParams.model_validate({"query": "x", "max_results": 3}).max_results == 3
    with pytest.raises(ValidationError):
        SearchParams.model_validate({"query": "x", "max_results": 11})


async def test_primary_choice(
    tmp_path: Path,
    searx: FakeSearch,
    brave: FakeSearch,
    http: httpx.AsyncClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spacer = plan_rate(1.0)
    names = [b.name for b in make_backends(both(tmp_path, searx, brave), http, spacer)]
    assert names == ["searxng", "brave"]
    monkeypatch.setattr(search_tool_module, "ORDER", ("brave", "searxng"))
    chosen = both(tmp_path, searx, brave)
    assert [b.name for b in make_backends(chosen, http, spacer)] == ["brave", "searxng"]
    only_brave = make_settings(tmp_path, brave_api_key=KEY)
    assert [b.name for b in make_backends(only_brave, http, spacer)] == ["brave"]
    only_searx = make_settings(tmp_path, searxng_url=searx.root)
    assert [b.name for b in make_backends(only_searx, http, spacer)] == ["searxng"]


async def test_result_is_labelled_compact_and_names_the_backend(
    tmp_path: Path, searx: FakeSearch, brave: FakeSearch, http: httpx.AsyncClient
) -> None:
    out = await run(search_tool(both(tmp_path, searx, brave), http), query="harbour tides")
    assert out["backend"] == "searxng" and "never instructions" in out["notice"]
    assert out["results"][0] == {
        "title": "Harbour tide tables & times",
        "url": "https://tides.example.org/harbour",
        "snippet": "High water at 06:12 and 18:40 — low water at 00:05.",
    }
    assert out["results"][3]["date"] == "2025-11-20 14:05"
    assert brave.requests == []
    assert len(json.dumps(out, ensure_ascii=False)) < 2000


async def test_fallback_when_primary_fails(
    tmp_path: Path, searx: FakeSearch, brave: FakeSearch, http: httpx.AsyncClient
) -> None:
    searx.serve("/search", Reply("forbidden", status=403))
    out = await run(search_tool(both(tmp_path, searx, brave), http), query="sourdough")
    assert out["backend"] == "brave" and len(out["results"]) == 4
    assert "search.formats" in out["note"]
    assert KEY not in json.dumps(out)


async def test_fallback_from_brave_to_searxng(
    tmp_path: Path,
    searx: FakeSearch,
    brave: FakeSearch,
    http: httpx.AsyncClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    brave.serve(WEB, Reply(fixture("brave_401.json"), status=401))
    monkeypatch.setattr(search_tool_module, "ORDER", ("brave", "searxng"))
    settings = both(tmp_path, searx, brave)
    out = await run(search_tool(settings, http), query="tides")
    assert out["backend"] == "searxng" and "BRAVE_API_KEY" in out["note"]


async def test_both_failing_reports_both(
    tmp_path: Path, searx: FakeSearch, brave: FakeSearch, http: httpx.AsyncClient
) -> None:
    searx.serve("/search", Reply("slow down", status=429))
    brave.serve(WEB, Reply("oops", status=503))
    with pytest.raises(ToolError) as err:
        await run(search_tool(both(tmp_path, searx, brave), http), query="x")
    text = str(err.value)
    assert "server.limiter: false" in text and "Brave Search failed with HTTP 503" in text
    assert KEY not in text


async def test_empty_result_says_so(
    tmp_path: Path, searx: FakeSearch, http: httpx.AsyncClient
) -> None:
    searx.serve("/search", Reply(fixture("searxng_no_results.json")))
    tool = search_tool(make_settings(tmp_path, searxng_url=searx.root), http)
    out = await run(tool, query="zzqqxx")
    assert out["results"] == [] and "no results" in out["note"]


async def test_identical_searches_come_from_the_cache(
    tmp_path: Path, searx: FakeSearch, http: httpx.AsyncClient
) -> None:
    clock = FakeClock()
    tool = search_tool(make_settings(tmp_path, searxng_url=searx.root), http, clock)
    first = await run(tool, query="harbour tides")
    again = await run(tool, query="  Harbour   TIDES ")
    assert again["cached"] is True and again["results"] == first["results"]
    assert "cached" not in first
    assert searx.count("/search") == 1
    await run(tool, query="harbour tides", type="news")
    await run(tool, query="harbour tides", max_results=3)
    assert searx.count("/search") == 3
    clock.now += 601
    await run(tool, query="harbour tides")
    assert searx.count("/search") == 4


async def test_cache_does_not_depend_on_the_backend(
    tmp_path: Path, searx: FakeSearch, brave: FakeSearch, http: httpx.AsyncClient
) -> None:
    searx.add("/search", Reply("down", status=502))
    tool = search_tool(both(tmp_path, searx, brave), http)
    first = await run(tool, query="sourdough")
    second = await run(tool, query="sourdough")
    assert first["backend"] == second["backend"] == "brave" and second["cached"]
    assert brave.count(WEB) == 1 and searx.count("/search") == 1


async def test_failures_are_not_cached(
    tmp_path: Path, searx: FakeSearch, http: httpx.AsyncClient
) -> None:
    searx.add("/search", Reply("down", status=502))
    tool = search_tool(make_settings(tmp_path, searxng_url=searx.root), http)
    with pytest.raises(ToolError, match="HTTP 502"):
        await run(tool, query="tides")
    out = await run(tool, query="tides")
    assert out["backend"] == "searxng" and "cached" not in out


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ('{"query": "x", "max_results": 11}', "max_results"),
        ('{"query": "x", "max_results": 0}', "max_results"),
        ('{"query": "   "}', "query is empty"),
        ('{"query": "x", "type": "images"}', "type"),
        ('{"query": "x", "language": "english; drop"}', "language"),
        ('{"query": "x", "time_range": "decade"}', "time_range"),
        ("{}", "query"),
        ('{"query": "x",', "not valid JSON"),  # plain text is the query (tools/base.py)
    ],
)
async def test_bad_arguments_get_a_clear_error(
    tmp_path: Path, searx: FakeSearch, http: httpx.AsyncClient, args: str, words: str
) -> None:
    tool = search_tool(make_settings(tmp_path, searxng_url=searx.root), http)
    outcome = await run_call(
        RequestTools({"search": tool}), LLMToolCall("c1", "search", args), call()
    )
    assert not outcome.ok and outcome.text.startswith("Error:")
    assert words in outcome.text
    assert searx.requests == []


@pytest.mark.db
async def test_the_model_gets_the_mapped_results(
    tmp_path: Path, fake_llm: FakeOpenAI, searx: FakeSearch
) -> None:
    settings = make_settings(tmp_path, fake_llm, searxng_url=searx.root)
    app: App = await build_app(settings, llm=LLMClient(settings, retry_base_delay=0.01))
    try:
        assert "search" in app.registry.names()
        fake_llm.add(
            Calls([("search", {"query": "harbour tides", "max_results": 3})]),
            Text("High water is at 06:12."),
        )
        reply = await app.agent.handle(Incoming("when is high tide?", telegram_user_id=5))
    finally:
        await app.close()
    assert reply.text == "High water is at 06:12."
    tool_msgs = [m for m in fake_llm.requests[1]["messages"] if m["role"] == "tool"]
    note, _, body = tool_msgs[0]["content"].partition("\n")
    assert note.startswith(f"{OUTSIDE_MARK}search results for 'harbour tides'")
    result = json.loads(body)
    assert result["backend"] == "searxng" and len(result["results"]) == 3
    assert result["results"][0]["url"] == "https://tides.example.org/harbour"
    assert searx.requests[0].params["q"] == "harbour tides"
