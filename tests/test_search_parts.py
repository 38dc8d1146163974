"""The search tool's small parts: HTML → text, dates, cache, rate spacing, cache keys."""

from __future__ import annotations

import asyncio

import pytest

from tools.search.cache import TTLCache
from tools.search.hits import Hit, Query, dedupe, short_date
from tools.search.ratelimit import Spacer
from tools.search.text import clip, plain, snippet


class FakeClock:
    """Monotonic time that moves only when someone sleeps (or the test says so)."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_plain_strips_tags_and_decodes_entities() -> None:
    raw = "A &quot;Hello&quot; <strong>bold</strong> it&#x27;s &amp; <em>more</em>"
    assert plain(raw) == 'A "Hello" bold it\'s & more'


def test_plain_drops_scripts_and_keeps_lone_angle_brackets() -> None:
    assert plain("<script>alert(1)</script>5 < 6 and <b>unclosed") == "5 < 6 and unclosed"
    assert plain("line<br>break<p>para</p>") == "line break para"


@pytest.mark.parametrize("bad", [None, 42, "", ["x"], {"a": 1}])
def test_plain_of_non_text_is_empty(bad: object) -> None:
    assert plain(bad) == ""


def test_snippet_is_at_most_300_chars_and_cut_at_a_word() -> None:
    out = snippet("<b>word</b> " * 200)
    assert len(out) <= 300 and out.endswith("…")
    assert out[:-1].split(" ")[-1] == "word"
    assert clip("short", 300) == "short"


@pytest.mark.parametrize(
    ("raw", "want"),
    [
        ("2024-12-27T15:49:55", "2024-12-27 15:49"),
        ("2025-01-02T00:00:00", "2025-01-02"),
        ("2025-11-17T00:00:00+00:00", "2025-11-17"),
        ("2025-11-17T08:01:00Z", "2025-11-17 08:01"),
        ("4 days ago", "4 days ago"),
        (None, None),
        ("", None),
        (1700000000, None),
    ],
)
def test_short_date(raw: object, want: str | None) -> None:
    assert short_date(raw) == want


def test_query_key_ignores_case_and_spacing_but_not_options() -> None:
    base = Query("Harbour  Tides", "web", 5)
    assert base.key() == Query(" harbour tides ", "web", 5).key()
    assert base.key() != Query("harbour tides", "news", 5).key()
    assert base.key() != Query("harbour tides", "web", 6).key()
    assert base.key() != Query("harbour tides", "web", 5, time_range="day").key()
    assert base.key() != Query("harbour tides", "web", 5, language="de").key()


def test_dedupe_keeps_first_of_each_url_up_to_limit() -> None:
    hits = [Hit("a", "https://a", ""), Hit("a2", "https://a", ""), Hit("b", "https://b", "")]
    assert [h.title for h in dedupe(hits, 5)] == ["a", "b"]
    assert [h.title for h in dedupe(hits, 1)] == ["a"]


def test_cache_expires_after_ttl() -> None:
    clock = FakeClock()
    cache: TTLCache[str] = TTLCache(size=4, ttl=600, clock=clock)
    cache.put("k", "v")
    clock.now += 599
    assert cache.get("k") == "v"
    clock.now += 1
    assert cache.get("k") is None
    assert len(cache) == 0


def test_cache_is_bounded_and_drops_least_recently_used() -> None:
    cache: TTLCache[int] = TTLCache(size=3, ttl=600, clock=FakeClock())
    for i in range(3):
        cache.put(i, i)
    assert cache.get(0) == 0  # 0 is now the most recently used
    cache.put(3, 3)
    assert len(cache) == 3
    assert cache.get(1) is None
    assert [cache.get(k) for k in (0, 2, 3)] == [0, 2, 3]


async def test_spacer_spaces_back_to_back_calls() -> None:
    clock = FakeClock()
    spacer = Spacer(1.0, clock=clock, sleep=clock.sleep)
    for _ in range(3):
        await spacer.acquire()
    assert clock.sleeps == pytest.approx([1.0, 1.0])


async def test_spacer_does_not_wait_when_calls_are_far_apart() -> None:
    clock = FakeClock()
    spacer = Spacer(2.0, clock=clock, sleep=clock.sleep)
    await spacer.acquire()
    clock.now += 0.2
    await spacer.acquire()
    clock.now += 5
    await spacer.acquire()
    assert clock.sleeps == pytest.approx([0.3])


async def test_spacer_serialises_concurrent_callers() -> None:
    clock = FakeClock()
    spacer = Spacer(4.0, clock=clock, sleep=clock.sleep)
    await asyncio.gather(*(spacer.acquire() for _ in range(4)))
    assert clock.sleeps == pytest.approx([0.25, 0.25, 0.25])


async def test_spacer_hold_delays_the_next_call() -> None:
    clock = FakeClock()
    spacer = Spacer(1.0, clock=clock, sleep=clock.sleep)
    await spacer.acquire()
    spacer.hold(3.0)
    await spacer.acquire()
    assert clock.sleeps == pytest.approx([3.0])
