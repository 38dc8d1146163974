"""SearXNG and Brave backends against local servers answering with real-shaped bodies."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from tests.fakes.search_server import FakeSearch, Reply, fixture
from tests.test_search_parts import FakeClock
from tools.search.brave import BraveBackend, plan_rate
from tools.search.hits import BackendError, Query
from tools.search.searxng import SearxngBackend

KEY = "BSA-test-key-0123456789"
WEB, NEWS = "/res/v1/web/search", "/res/v1/news/search"


@pytest.fixture
async def server() -> AsyncIterator[FakeSearch]:
    fake = await FakeSearch().start()
    yield fake
    await fake.stop()


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient() as client:
        yield client


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def searx(http: httpx.AsyncClient, server: FakeSearch, timeout: float = 5.0) -> SearxngBackend:
    return SearxngBackend(http, server.root + "/", timeout=timeout)


def brave(http: httpx.AsyncClient, server: FakeSearch, clock: FakeClock) -> BraveBackend:
    """A plan rate no test waits for; the waits a 429 names go to the fake clock."""
    limiter = plan_rate(1000.0)
    return BraveBackend(http, KEY, server.root + "/res/v1", limiter, timeout=5.0, sleep=clock.sleep)


# --- SearXNG -----------------------------------------------------------------------


async def test_searxng_maps_results(server: FakeSearch, http: httpx.AsyncClient) -> None:
    server.serve("/search", Reply(fixture("searxng_web.json")))
    hits = await searx(http, server).search(Query("harbour tides", max_results=10))
    assert [h.url for h in hits] == [
        "https://tides.example.org/harbour",
        "https://wiki.example.org/Tide",
        "https://blog.example.net/tides-explained",
        "https://news.example.com/storm-tide",
    ]  # duplicate url and the url-less result are gone
    first, wiki, blog, storm = hits
    assert first.title == "Harbour tide tables & times"
    assert first.snippet == "High water at 06:12 and 18:40 — low water at 00:05."
    assert first.date is None
    assert wiki.date == "2025-03-04" and len(wiki.snippet) <= 300 and wiki.snippet.endswith("…")
    assert blog.snippet == ""  # content: null
    assert storm.date == "2025-11-20 14:05"


async def test_searxng_request_parameters(server: FakeSearch, http: httpx.AsyncClient) -> None:
    server.serve("/search", Reply(fixture("searxng_news.json")))
    backend = searx(http, server)
    await backend.search(Query("harbour tides"))
    await backend.search(Query("council budget", "news", 2, language="de", time_range="week"))
    web, news = (r.params for r in server.requests)
    assert web == {
        "q": "harbour tides",
        "format": "json",
        "categories": "general",
        "safesearch": "1",
    }
    assert news["categories"] == "news" and news["language"] == "de"
    assert news["time_range"] == "week" and news["format"] == "json"


async def test_searxng_news_dates_and_limit(server: FakeSearch, http: httpx.AsyncClient) -> None:
    server.serve("/search", Reply(fixture("searxng_news.json")))
    hits = await searx(http, server).search(Query("budget", "news", 10))
    assert [h.date for h in hits] == ["2025-11-18 09:30", "2025-11-17", "not a date"]
    assert hits[0].snippet == "The council voted 7–2 on Tuesday."
    assert len(await searx(http, server).search(Query("budget", "news", 2))) == 2


async def test_searxng_accepts_url_with_search_suffix(
    server: FakeSearch, http: httpx.AsyncClient
) -> None:
    server.serve("/search", Reply(fixture("searxng_news.json")))
    backend = SearxngBackend(http, server.root + "/search/")
    assert len(await backend.search(Query("x"))) == 3


@pytest.mark.parametrize(
    ("status", "words"),
    [
        (403, ["403", "search.formats", "json"]),
        (429, ["429", "server.limiter: false"]),
        (502, ["HTTP 502", "logs"]),
        (404, ["404", "SEARXNG_URL"]),
    ],
)
async def test_searxng_http_errors_explain_the_fix(
    server: FakeSearch, http: httpx.AsyncClient, status: int, words: list[str]
) -> None:
    server.serve("/search", Reply("<html>nope</html>", status=status))
    with pytest.raises(BackendError) as err:
        await searx(http, server).search(Query("x"))
    text = str(err.value)
    for word in words:
        assert word in text
    assert server.root in text


async def test_searxng_html_page_instead_of_json(
    server: FakeSearch, http: httpx.AsyncClient
) -> None:
    server.serve("/search", Reply("<html>results</html>"))
    with pytest.raises(BackendError, match="did not answer with search JSON"):
        await searx(http, server).search(Query("x"))
    server.serve("/search", Reply({"results": "not a list"}))
    with pytest.raises(BackendError, match="did not answer with search JSON"):
        await searx(http, server).search(Query("x"))


async def test_searxng_empty_with_failed_engines_names_them(
    server: FakeSearch, http: httpx.AsyncClient
) -> None:
    server.serve("/search", Reply(fixture("searxng_unresponsive_empty.json")))
    with pytest.raises(BackendError) as err:
        await searx(http, server).search(Query("x"))
    assert "duckduckgo (CAPTCHA), brave (too many requests), qwant" in str(err.value)


async def test_searxng_no_results_is_not_an_error(
    server: FakeSearch, http: httpx.AsyncClient
) -> None:
    server.serve("/search", Reply(fixture("searxng_no_results.json")))
    assert await searx(http, server).search(Query("zzqqxx")) == []


async def test_searxng_timeout_names_the_url(server: FakeSearch, http: httpx.AsyncClient) -> None:
    server.serve("/search", Reply(hang=True))
    with pytest.raises(BackendError) as err:
        await searx(http, server, timeout=0.2).search(Query("x"))
    assert "did not answer within 0.2 s" in str(err.value) and server.root in str(err.value)


async def test_searxng_connection_refused_names_the_url(http: httpx.AsyncClient) -> None:
    backend = SearxngBackend(http, "http://127.0.0.1:9")
    with pytest.raises(BackendError) as err:
        await backend.search(Query("x"))
    assert "cannot reach SearXNG at http://127.0.0.1:9/search" in str(err.value)


async def test_searxng_url_that_is_not_http(http: httpx.AsyncClient) -> None:
    with pytest.raises(BackendError, match="not an http"):
        await SearxngBackend(http, "searxng:8080").search(Query("x"))


# --- Brave -------------------------------------------------------------------------


async def test_brave_web_maps_results(
    server: FakeSearch, http: httpx.AsyncClient, clock: FakeClock
) -> None:
    server.serve(WEB, Reply(fixture("brave_web.json")))
    hits = await brave(http, server, clock).search(Query("sourdough starter", max_results=10))
    assert [h.url for h in hits] == [
        "https://bake.example.com/starter",
        "https://en.wiki.example.org/wiki/Sourdough",
        "https://faq.example.net/starter",
        "https://forum.example.org/t/123",
    ]  # the video result is not a web result
    starter, wiki, faq, forum = hits
    assert starter.title == 'How to make a "sourdough" starter'
    assert starter.snippet == 'A "starter" is flour and water that\'s fermented by wild yeast.'
    assert starter.date == "2024-12-27 15:49"
    assert wiki.date == "2025-01-02" and len(wiki.snippet) <= 300
    assert wiki.snippet.startswith("Sourdough starter care")
    assert faq.snippet == "Why does my starter smell? Hooch explained." and faq.date is None
    assert forum.snippet == "Is 20°C warm enough?" and forum.date == "3 weeks ago"


async def test_brave_request_has_token_and_parameters(
    server: FakeSearch, http: httpx.AsyncClient, clock: FakeClock
) -> None:
    server.serve(NEWS, Reply(fixture("brave_news.json")))
    await brave(http, server, clock).search(
        Query("rail strike", "news", 3, language="pt-BR", time_range="day")
    )
    seen = server.requests[0]
    assert seen.path == NEWS
    assert seen.headers["X-Subscription-Token"] == KEY
    assert seen.params == {
        "q": "rail strike",
        "count": "3",
        "safesearch": "moderate",
        "search_lang": "pt",
        "freshness": "pd",
    }


async def test_brave_news_results_are_flat(
    server: FakeSearch, http: httpx.AsyncClient, clock: FakeClock
) -> None:
    server.serve(NEWS, Reply(fixture("brave_news.json")))
    hits = await brave(http, server, clock).search(Query("rail strike", "news", 5))
    assert [(h.title, h.date) for h in hits] == [
        ("Rail strike called off", "2025-11-21 17:09"),
        ("What the rail deal means", "7 hours ago"),
        ("Rail strike: timeline", None),
    ]
    assert hits[0].snippet == "Unions and operators reached a deal late on Sunday."
    assert hits[1].snippet == "Commuters & freight: an explainer."


async def test_brave_without_web_section_is_empty(
    server: FakeSearch, http: httpx.AsyncClient, clock: FakeClock
) -> None:
    server.serve(WEB, Reply({"type": "search", "query": {"original": "x"}}))
    assert await brave(http, server, clock).search(Query("x")) == []


async def test_brave_bad_key_explains_without_leaking_it(
    server: FakeSearch, http: httpx.AsyncClient, clock: FakeClock
) -> None:
    server.serve(WEB, Reply(fixture("brave_401.json"), status=401))
    with pytest.raises(BackendError) as err:
        await brave(http, server, clock).search(Query("x"))
    text = str(err.value)
    assert "rejected the API key" in text and "BRAVE_API_KEY" in text
    assert "subscription token is invalid" in text and KEY not in text


async def test_brave_5xx_and_timeout(
    server: FakeSearch, http: httpx.AsyncClient, clock: FakeClock
) -> None:
    server.serve(WEB, Reply("<html>bad gateway</html>", status=502))
    with pytest.raises(BackendError, match="HTTP 502"):
        await brave(http, server, clock).search(Query("x"))
    server.serve(WEB, Reply(hang=True))
    backend = brave(http, server, clock)
    backend.timeout = 0.2
    with pytest.raises(BackendError, match=r"did not answer within 0\.2 s"):
        await backend.search(Query("x"))


def limited(reset: str = "1, 1419704", remaining: str = "0, 1985", **extra: str) -> Reply:
    headers = {
        "X-RateLimit-Limit": "1, 2000",
        "X-RateLimit-Policy": "1;w=1, 2000;w=2592000",
        "X-RateLimit-Remaining": remaining,
        "X-RateLimit-Reset": reset,
        **extra,
    }
    return Reply(fixture("brave_429.json"), status=429, headers=headers)


async def test_brave_429_waits_for_reset_then_retries(
    server: FakeSearch, http: httpx.AsyncClient, clock: FakeClock
) -> None:
    server.add(WEB, limited(reset="2, 1419704"))
    server.serve(WEB, Reply(fixture("brave_web.json")))
    hits = await brave(http, server, clock).search(Query("x"))
    assert len(hits) == 4 and server.count(WEB) == 2
    assert clock.sleeps == pytest.approx([2.0])


async def test_brave_honours_retry_after(
    server: FakeSearch, http: httpx.AsyncClient, clock: FakeClock
) -> None:
    server.add(WEB, limited(**{"Retry-After": "3"}))
    server.serve(WEB, Reply(fixture("brave_web.json")))
    await brave(http, server, clock).search(Query("x"))
    assert clock.sleeps == pytest.approx([3.0])


async def test_brave_429_twice_reports_rate_limit(
    server: FakeSearch, http: httpx.AsyncClient, clock: FakeClock
) -> None:
    server.serve(WEB, limited())
    with pytest.raises(BackendError) as err:
        await brave(http, server, clock).search(Query("x"))
    assert "rate-limiting" in str(err.value) and "quota" in str(err.value)
    assert server.count(WEB) == 2


async def test_brave_429_with_long_reset_does_not_wait(
    server: FakeSearch, http: httpx.AsyncClient, clock: FakeClock
) -> None:
    server.serve(WEB, limited(reset="40, 1419704"))
    with pytest.raises(BackendError, match="next request in 40 s"):
        await brave(http, server, clock).search(Query("x"))
    assert server.count(WEB) == 1 and clock.sleeps == []


@pytest.mark.parametrize("body", ["brave_429.json", "brave_429_quota.json"])
async def test_brave_monthly_quota_used_up(
    server: FakeSearch, http: httpx.AsyncClient, clock: FakeClock, body: str
) -> None:
    reply = limited(reset="1, 864000", remaining="0, 0" if body == "brave_429.json" else "0, 3")
    reply.body = fixture(body)
    server.serve(WEB, reply)
    with pytest.raises(BackendError) as err:
        await brave(http, server, clock).search(Query("x"))
    assert "monthly quota is used up" in str(err.value) and "10.0 days" in str(err.value)
    assert server.count(WEB) == 1


async def test_searxng_basic_auth_password_stays_out_of_messages(
    server: FakeSearch, http: httpx.AsyncClient
) -> None:
    server.serve("/search", Reply(fixture("searxng_web.json")))
    url = server.root.replace("http://", "http://admin:hunter2pass@")
    backend = SearxngBackend(http, url)
    assert len(await backend.search(Query("tides"))) == 4
    assert server.requests[0].headers["Authorization"].startswith("Basic ")
    server.serve("/search", Reply("no", status=403))
    with pytest.raises(BackendError) as err:
        await backend.search(Query("other"))
    assert "hunter2pass" not in str(err.value) and "hunter2pass" not in backend.label
    assert server.root in str(err.value)
    with pytest.raises(BackendError) as err:
        await SearxngBackend(http, "http://admin:hunter2pass@127.0.0.1:9").search(Query("x"))
    assert "hunter2pass" not in str(err.value) and "127.0.0.1:9" in str(err.value)
