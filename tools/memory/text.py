"""Memory text and queries as a recall reads them: whitespace normalising, a query's content
words and their FTS5 match, the near-duplicate test, pruning the commonest query words from
BM25, and the time a query names. The two things recall reads from a query, its words and
its time, are read here, in one place.

On a big store a common word makes FTS5 walk a long posting list; keeping only the rarest
words whose counts add up to a budget bounds that work and never bites below ~5k memories.
WordCounts keeps those counts, read once per word and cached.

The time a query names (query_span), resolved against when it is asked: recall favours
memories made within that span (tools/memory/rank.py on_date), since what was said on a day
is stored that day, so "what did I do last week?" or "when did we go camping in June?"
finds what was said then. Absolute dates ("3 June, 2023", "June 3rd 2023", "2023-06-03",
"June 2023") and relative ones: today, yesterday, tonight, last night, this/last/next week,
weekend, month and year, "N days/weeks/months/years ago", a weekday ("last Friday", "on
Fri", "Friday": the latest one before today), and a day or month without a year ("3 June",
"in June": the latest one that has begun; a bare month only after "in", "of", "since",
"during", "early", "mid", "late", "last" or "this", as "may" and "march" are also words).
When a text names several, the first one counts.

Measured (bench/memory_recall.py): resolving the same phrases in what the memories say
("Last week I went to a parade", stored 3 July → late June) and matching those spans too
lost recall on the measured-only conversation (0.795 → 0.788 at 10): a memory's "last
year" is wide and common, so it lifted many memories at once; not kept.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from tools.memory import repo

# Words too common to help a BM25 match; dropping them also keeps FTS5 queries fast.
STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers herself him himself his how i if in into is it
    its itself just me more most my myself no nor not now of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself
    yourselves also get got ever s t don""".split()
)
_WORD = re.compile(r"\w+", re.UNICODE)


def normalise(text: str) -> str:
    return " ".join(text.split())


def words(text: str) -> list[str]:
    return [w for w in _WORD.findall(text.lower()) if w not in STOPWORDS]


def query_words(text: str, max_terms: int = 32) -> list[str]:
    """The query's distinct content words, in order."""
    seen: list[str] = []
    for w in words(text):
        if len(w) > 1 and w not in seen:
            seen.append(w)
    return seen[:max_terms]


def fts_match(terms: list[str]) -> str:
    """An FTS5 MATCH expression: the words OR-ed, each quoted."""
    return " OR ".join(f'"{w}"' for w in terms)


def prune(freqs: list[tuple[str, int]], budget: int) -> list[str]:
    """The rarest words whose document counts add up to at most `budget` (always at least
    the rarest one), in their original order.

    FTS5 scores every memory that holds any query word, so a word in 20% of 100k memories
    costs milliseconds while adding little (BM25 gives it a low IDF); the rare words are
    the ones that find the answer."""
    keep: set[str] = set()
    total = 0
    for w, df in sorted(freqs, key=lambda t: t[1]):
        if keep and total + df > budget:
            break
        keep.add(w)
        total += df
    return [w for w, _ in freqs if w in keep]


def same_words(a: str, b: str, threshold: float = 0.75) -> bool:
    """Whether two texts share most of their content words (Jaccard), so an embedding
    match that only shares the topic ("lives in Berlin" / "lives in Munich") is not merged."""
    wa, wb = set(words(a)) or set(a.lower().split()), set(words(b)) or set(b.lower().split())
    if not wa or not wb:
        return False
    return len(wa & wb) / len(wa | wb) >= threshold


def frame(text: str) -> str | None:
    """A fact's first two words, lower-cased ("lives in" of "Lives in Porto"), when more
    follow: two facts of one category in the same frame with different ends may contradict
    each other ("Lives in Lisbon"), or not ("Has a dog" / "Has a cat"); the model decides
    (the store's result names the older one), and recall puts the newer first."""
    found = _WORD.findall(text.lower())
    return " ".join(found[:2]) if len(found) > 2 else None


# Counts are read again after this many writes through the store.
REFRESH_WRITES = 100
MAX_WORDS = 50_000  # cached words before the cache starts over


class WordCounts:
    def __init__(self, budget: int = 5000) -> None:
        self.budget = budget
        self.freqs: dict[str, tuple[str, int]] = {}  # word -> (FTS5 term, memory count)
        self.writes = 0  # writes since the cache was filled

    def note_writes(self, n: int = 1) -> None:
        self.writes += n

    async def keep(self, s: Any, terms: list[str], memories: int) -> list[str]:
        """The rarest of `terms` (at least one) whose counts fit the budget. No word is in
        more than the `memories` there are: when that many for each word fit, every word
        stays and no count is read (the three statements a recall on a small store made)."""
        if len(terms) * memories <= self.budget:
            return terms
        if self.writes >= REFRESH_WRITES:
            self.freqs.clear()
            self.writes = 0
        new = [w for w in terms if w not in self.freqs]
        if new:
            if len(self.freqs) > MAX_WORDS:
                self.freqs.clear()
            self.freqs.update(await repo.doc_freqs(s, new))
        return prune([(w, self.freqs[w][1]) for w in terms], self.budget)


# -- the time a query names ---------------------------------------------------------

Span = tuple[datetime, datetime]  # [start, end)

MONTHS = {name.lower(): i for i, name in enumerate(calendar.month_name) if name}
MONTHS |= {name.lower(): i for i, name in enumerate(calendar.month_abbr) if name}
_MONTH = "|".join(sorted(MONTHS, key=len, reverse=True))
WEEKDAYS = {name.lower(): i for i, name in enumerate(calendar.day_name)}
WEEKDAYS |= {name.lower(): i for i, name in enumerate(calendar.day_abbr)}
_WEEKDAY = "|".join(sorted(WEEKDAYS, key=len, reverse=True))
_ORD = r"(?:st|nd|rd|th)?"
COUNTS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6,
    "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
    "a couple of": 2, "a few": 3, "several": 3,
}  # fmt: skip
_COUNT = "|".join(sorted(COUNTS, key=len, reverse=True)) + r"|\d{1,2}"

_ISO = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")
# "3 June, 2023", "June 3, 2023", "June 2023", "June 3rd 2023"
_NAMED = re.compile(
    rf"\b(?:(\d{{1,2}}){_ORD}\s+(?:of\s+)?)?({_MONTH})\.?(?:\s+(\d{{1,2}}){_ORD})?,?\s+(\d{{4}})\b",
    re.IGNORECASE,
)
# The same without a year: "3 June", "June 3rd", "in June", "early May".
_DAY_MONTH = re.compile(
    rf"\b(?:(\d{{1,2}}){_ORD}\s+(?:of\s+)?({_MONTH})|({_MONTH})\.?\s+(\d{{1,2}}){_ORD})\b(?!\s*:)",
    re.IGNORECASE,
)
_IN_MONTH = re.compile(
    rf"\b(in|of|since|during|early|mid|late|last|this)[\s-]+({_MONTH})\b\.?(?!,?\s*\d)",
    re.IGNORECASE,
)
_AGO = re.compile(rf"\b({_COUNT})\s+(day|week(?:end)?|month|year)s?\s+ago\b", re.IGNORECASE)
_PERIOD = re.compile(r"\b(this|last|past|next)\s+(week(?:end)?|month|year)\b", re.IGNORECASE)
# A bare abbreviation ("sat", "sun", "wed") is a word more often than a day: only after
# last/on/this/next.
_FULL_WEEKDAY = "|".join(name.lower() for name in calendar.day_name)
_WEEKDAY_RE = re.compile(
    rf"\b(?:(last|on|this|next)\s+({_WEEKDAY})\b\.?|({_FULL_WEEKDAY})\b)", re.IGNORECASE
)
_DAYS = {
    "today": 0, "tonight": 0, "this morning": 0, "this afternoon": 0, "this evening": 0,
    "yesterday": 1, "last night": 1, "the day before yesterday": 2, "tomorrow": -1,
}  # fmt: skip
_DAY_WORDS = re.compile(
    r"\b(" + "|".join(sorted(_DAYS, key=len, reverse=True)) + r")\b", re.IGNORECASE
)


def _midnight(t: datetime) -> datetime:
    return t.replace(hour=0, minute=0, second=0, microsecond=0)


def _day(year: int, month: int, day: int, tz: object) -> Span | None:
    try:
        start = datetime(year, month, day, tzinfo=tz)  # type: ignore[arg-type]
    except ValueError:
        return None
    return start, start + timedelta(days=1)


def _month(year: int, month: int, tz: object) -> Span:
    start = datetime(year, month, 1, tzinfo=tz)  # type: ignore[arg-type]
    return start, datetime(year + month // 12, month % 12 + 1, 1, tzinfo=tz)  # type: ignore[arg-type]


def _year(year: int, tz: object) -> Span:
    return datetime(year, 1, 1, tzinfo=tz), datetime(year + 1, 1, 1, tzinfo=tz)  # type: ignore[arg-type]


def _months_back(t: datetime, n: int) -> tuple[int, int]:
    k = t.year * 12 + t.month - 1 - n
    return k // 12, k % 12 + 1


def _iso(m: re.Match[str], now: datetime) -> Span | None:
    return _day(int(m.group(1)), int(m.group(2)), int(m.group(3)), now.tzinfo)


def _named(m: re.Match[str], now: datetime) -> Span | None:
    year, month = int(m.group(4)), MONTHS[m.group(2).lower()]
    day = m.group(1) or m.group(3)
    return _day(year, month, int(day), now.tzinfo) if day else _month(year, month, now.tzinfo)


def _day_month(m: re.Match[str], now: datetime) -> Span | None:
    """A day of a month without a year: the latest one not after `now`."""
    month = MONTHS[(m.group(2) or m.group(3)).lower()]
    day = int(m.group(1) or m.group(4))
    year = now.year if (month, day) <= (now.month, now.day) else now.year - 1
    return _day(year, month, day, now.tzinfo)


def _in_month(m: re.Match[str], now: datetime) -> Span | None:
    """The latest such month that has begun ("last March", asked in March: a year ago)."""
    month = MONTHS[m.group(2).lower()]
    begun = month < now.month or (month == now.month and m.group(1).lower() != "last")
    return _month(now.year if begun else now.year - 1, month, now.tzinfo)


def _ago(m: re.Match[str], now: datetime) -> Span | None:
    raw = m.group(1).lower()
    n = int(raw) if raw.isdigit() else COUNTS[raw]
    unit = m.group(2).lower()
    if unit == "day":
        day = _midnight(now - timedelta(days=n))
        return day, day + timedelta(days=1)
    if unit in ("week", "weekend"):  # give or take half a week
        mid = _midnight(now - timedelta(weeks=n))
        return mid - timedelta(days=3), mid + timedelta(days=4)
    if unit == "month":
        return _month(*_months_back(now, n), now.tzinfo)
    return _year(now.year - n, now.tzinfo)


def _period(m: re.Match[str], now: datetime) -> Span | None:
    which, unit = m.group(1).lower(), m.group(2).lower()
    step = {"this": 0, "last": -1, "past": -1, "next": 1}[which]
    today = _midnight(now)
    if unit == "week":
        monday = today - timedelta(days=today.weekday()) + timedelta(weeks=step)
        return monday, monday + timedelta(weeks=1)
    if unit == "weekend":
        saturday = today - timedelta(days=(today.weekday() - 5) % 7)  # the latest one
        if today.weekday() < 5:  # on a weekday, the latest weekend is over: "last" is it
            saturday += timedelta(weeks=1 if which in ("this", "next") else 0)
        else:
            saturday += timedelta(weeks=step)
        return saturday, saturday + timedelta(days=2)
    if unit == "month":
        return _month(*_months_back(now, -step), now.tzinfo)
    return _year(now.year + step, now.tzinfo)


def _weekday(m: re.Match[str], now: datetime) -> Span | None:
    """ "last Friday", "on Fri", "Friday": the latest one before today (this and next: the
    coming one)."""
    which = (m.group(1) or "").lower()
    target = WEEKDAYS[(m.group(2) or m.group(3)).lower()]
    today = _midnight(now)
    if which in ("this", "next"):
        ahead = (target - today.weekday()) % 7 or 7
        day = today + timedelta(days=ahead)
    else:
        back = (today.weekday() - target) % 7 or 7
        day = today - timedelta(days=back)
    return day, day + timedelta(days=1)


def _day_word(m: re.Match[str], now: datetime) -> Span | None:
    day = _midnight(now) - timedelta(days=_DAYS[m.group(1).lower()])
    return day, day + timedelta(days=1)


Parser = Callable[[re.Match[str], datetime], Span | None]
# Most specific first: where two match at one place, the earlier one here wins.
_PARSERS: tuple[tuple[re.Pattern[str], Parser], ...] = (
    (_ISO, _iso),
    (_NAMED, _named),
    (_DAY_MONTH, _day_month),
    (_IN_MONTH, _in_month),
    (_AGO, _ago),
    (_PERIOD, _period),
    (_DAY_WORDS, _day_word),
    (_WEEKDAY_RE, _weekday),
)


def query_span(text: str, now: datetime) -> Span | None:
    """The first time `text` names, as [start, end) in `now`'s time zone, resolved against
    `now`; None if it names none (or an impossible date)."""
    best: tuple[int, int, Span | None] | None = None
    for rank, (pattern, parse) in enumerate(_PARSERS):
        m = pattern.search(text)
        if m is None:
            continue
        if best is None or (m.start(), rank) < best[:2]:
            best = (m.start(), rank, parse(m, now))
    return best[2] if best else None
