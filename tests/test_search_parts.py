"""The search tool's small parts: HTML → text, dates, cache, rate spacing, cache keys."""

from __future__ import annotations

import pytest

from tools.search.hits import Hit, Query, dedupe, short_date
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
