"""The cheap half of checking a summary: what it names must occur in what it summarises.

A small model summarising a conversation invents in a recognisable way: a name nobody
said ("the user shared their name, 'John Doe'"), a number no tool produced ("executed it,
revealing 832040"), a date, a link. So every name (capitalised word), number, date, URL
and quoted string in the summary must occur in the source turns, compared after
normalising case and format ("1,000" = "1000", "2023-05-07" = "7 May 2023"), and a
summary that says code ran needs a tool result that succeeded. Paraphrase passes;
only the checkable specifics are checked. The model reviewer (bot/sessions/summary.py,
SUMMARY_REVIEW=model) is the second, costlier opinion.
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass, field

MONTHS = {
    m: i + 1
    for i, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ]
    )
    for m in names
}
WEEKDAYS = frozenset(
    "monday tuesday wednesday thursday friday saturday sunday mon tue wed thu fri sat sun".split()
)
NUMBER_WORDS = {
    w: i
    for i, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen "
        "fourteen fifteen sixteen seventeen eighteen nineteen twenty".split()
    )
} | {"thirty": 30, "forty": 40, "fifty": 50, "hundred": 100, "thousand": 1000, "dozen": 12}

# Capitalised words that are not names: sentence openers, pronouns, the two parties.
COMMON = frozenset(
    """a an the this that these those it its he she they them their his her hers we our us
    i me my you your yours who whom whose what which when where why how there here then
    and but or nor so yet also both either neither each every all any some many most more
    few several other another such no not none one after before during while since until
    later earlier afterwards finally first second third next last lastly meanwhile overall
    however moreover furthermore additionally besides instead still already again today
    tomorrow yesterday tonight now soon recently currently eventually initially ultimately
    on in at by for from with without about above below between among into onto to of as
    if though although because unless whether than like despite through throughout over
    under user users assistant sidekick bot conversation session summary they're we're
    it's she's he's i'm ok okay yes no hello hi thanks thank please dear mr mrs ms dr
    english url urls""".split()
)

_URL = re.compile(r"https?://[^\s<>\"')\]]+|www\.[^\s<>\"')\]]+", re.I)
_QUOTED = re.compile(
    r"\"([^\"\n]{2,120})\"|“([^”\n]{2,120})”|«([^»\n]{2,120})»|(?<!\w)'([^'\n]{2,80})'(?!\w)"
)
_ISO = re.compile(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b")
_NUMERIC_DATE = re.compile(r"\b(\d{1,2})[./](\d{1,2})[./](\d{2,4})\b")
_DAY_MONTH = re.compile(
    r"\b(\d{1,2})(?:st|nd|rd|th)?(?:\s+of)?\s+([A-Za-z]{3,9})\.?(?:,?\s+(\d{4}))?", re.I
)
_MONTH_DAY = re.compile(
    r"\b([A-Za-z]{3,9})\.?\s+(\d{1,2})(?:st|nd|rd|th)?\b(?:,?\s+(\d{4}))?", re.I
)
_NUMBER = re.compile(r"(?<![\w.])\d+(?:[,\u202f\u00a0 ]\d{3})*(?:\.\d+)?(?![\w])|\d+")
# A list item's number ("1. The user ...", "2) ...") counts the summary's own points.
_LIST_MARK = re.compile(r"^[ \t]*(?:[-*•][ \t]+)?\(?\d{1,3}[.)](?=[ \t])", re.M)
_WORD = re.compile(r"[^\W\d_][\w'’-]*", re.UNICODE)
# A capital after "°" is a unit (°C, °F), not a name; the number before it is checked.
_CAPITALISED = re.compile(r"(?<![\w'’°-])[A-Z][\w'’-]*", re.UNICODE)
# Units and currencies after a number ("20 C", "5 KM", "3 MB", "12 kWh", "30 EUR") are not
# names; the number before them is checked.
UNITS = frozenset(
    """c f k km kg g mg mb gb kb tb pb mbps gbps kbps hz khz mhz ghz w kw kwh mw mwh v mv
    ma l ml dl cl m cm mm mi ft lb lbs oz mph kmh pa hpa kpa psi db dpi fps px pt
    usd eur gbp chf jpy cny inr aud cad""".split()
)
_AFTER_NUMBER = re.compile(r"\d\s?°?\s?$")
_SENTENCE_END = re.compile(r"[.!?:;\n]\s*$")
_RAN = re.compile(
    r"\b(executed|execut(?:es|ing)|ran (?:it|the|a|this|that)|running it|the (?:code|script) "
    r"(?:ran|returned|printed|output)|revealing)\b",
    re.I,
)

_RELATIVE = re.compile(
    r"\b(tomorrow|yesterday|tonight|today|next|last|ago|this (?:week|weekend|month))\b", re.I
)
RELATIVE_DAYS = 10  # how far "next week" / "last weekend" may reach from the session's date

_VERBISH = re.compile(r"(ing|ed|ly|s)$")  # "Planning", "Asked", "Lives": verbs, not names
Date = tuple[int | None, int, int]  # (year or None, month, day)


@dataclass
class Grounding:
    missing: dict[str, list[str]] = field(default_factory=dict)  # kind -> items not found

    @property
    def ok(self) -> bool:
        return not self.missing

    def reason(self) -> str:
        parts = [
            f"{kind} not in the turns: {', '.join(items[:5])}"
            for kind, items in self.missing.items()
        ]
        return "; ".join(parts)


def _number(text: str) -> str:
    """A number's canonical form: no group separators, no trailing zeros after a point."""
    digits = re.sub(r"[,\u202f\u00a0 ]", "", text)
    if "." in digits:
        digits = digits.rstrip("0").rstrip(".")
    return digits.lstrip("0") or "0"


def _dates(text: str) -> tuple[set[Date], list[tuple[int, int]]]:
    """The dates in `text` and the spans they take (so their parts are not checked twice)."""
    found: set[Date] = set()
    spans: list[tuple[int, int]] = []

    def add(year: int | None, month: int, day: int, span: tuple[int, int]) -> None:
        if 1 <= month <= 12 and 1 <= day <= 31:
            found.add((year, month, day))
            spans.append(span)

    for m in _ISO.finditer(text):
        add(int(m[1]), int(m[2]), int(m[3]), m.span())
    for m in _NUMERIC_DATE.finditer(text):
        year = int(m[3]) + (2000 if len(m[3]) == 2 else 0)
        # Day-first and month-first are both read: the check only asks "was it said".
        add(year, int(m[2]), int(m[1]), m.span())
        add(year, int(m[1]), int(m[2]), m.span())
    for m in _DAY_MONTH.finditer(text):
        month = MONTHS.get(m[2].lower())
        if month:
            add(int(m[3]) if m[3] else None, month, int(m[1]), m.span())
    for m in _MONTH_DAY.finditer(text):
        month = MONTHS.get(m[1].lower())
        if month:
            add(int(m[3]) if m[3] else None, month, int(m[2]), m.span())
    return found, spans


def _near(said: Date, summary: Date) -> bool:
    y, m, d = said
    try:
        a = datetime.date(y or 2000, m, d)
        b = datetime.date(summary[0] or a.year, summary[1], summary[2])
    except ValueError:
        return False
    return abs((a - b).days) <= RELATIVE_DAYS


def _blank(text: str, spans: list[tuple[int, int]]) -> str:
    chars = list(text)
    for a, b in spans:
        chars[a:b] = " " * (b - a)
    return "".join(chars)


def _norm(text: str) -> str:
    return " ".join(re.sub(r"[^\w\s]", " ", text.lower().replace("’", "'")).split())


class Source:
    """The turns a summary covers, indexed once for any number of checks."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.flat = _norm(text)
        self.lower = text.lower()
        self.dates, spans = _dates(text)
        rest = _blank(text, spans)
        self.numbers = {_number(n) for n in _NUMBER.findall(text)}
        self.numbers |= {_number(n) for n in _NUMBER.findall(rest)}
        words = {w.lower().replace("’", "'") for w in _WORD.findall(text)}
        self.words = words | {w.split("'")[0] for w in words}
        for w in self.words:
            if w in NUMBER_WORDS:
                self.numbers.add(str(NUMBER_WORDS[w]))
        for _, month, day in self.dates:  # "2023-05-07" said "May" and "7"
            self.words |= {k for k, v in MONTHS.items() if v == month}
            self.numbers.add(str(day))
        self.prefixes = {w[:5] for w in self.words if len(w) >= 5}
        self.relative = bool(_RELATIVE.search(text))

    def has_word(self, word: str) -> bool:
        w = word.lower().replace("’", "'").split("'")[0].strip("-")
        if not w or w in self.words:
            return True
        # Inflections of a name said ("Sweden" / "Swedish", "Paris" / "Parisian").
        return len(w) >= 6 and w[:5] in self.prefixes

    def has_date(self, date: Date) -> bool:
        year, month, day = date
        if any(
            m == month and d == day and (year is None or y is None or y == year)
            for y, m, d in self.dates
        ):
            return True
        # "tomorrow", "last week" said in a dated session: the summary may resolve it.
        return self.relative and any(_near((y, m, d), date) for y, m, d in self.dates if y)


def check(
    summary: str, source: str | Source, *, tool_succeeded: bool = True, names: bool = True
) -> Grounding:
    """What in `summary` the source does not say. `tool_succeeded`: whether any tool call in
    the covered turns returned a result (a summary may only say code ran if one did).
    `names=False` skips the capitalised-word check (German capitalises every noun)."""
    src = source if isinstance(source, Source) else Source(source)
    result = Grounding()

    def miss(kind: str, item: str) -> None:
        items = result.missing.setdefault(kind, [])
        if item not in items:
            items.append(item)

    spans: list[tuple[int, int]] = []
    for m in _URL.finditer(summary):
        url = m[0].rstrip(".,;:!?").lower()
        if url.split("://", 1)[-1] not in src.lower:
            miss("links", m[0])
        spans.append(m.span())
    for m in _QUOTED.finditer(summary):
        quoted = next(g for g in m.groups() if g is not None)
        if "'" in m[0][:1] and " " not in quoted.strip():
            continue  # an apostrophe pair, not a quotation
        if _norm(quoted) and _norm(quoted) not in src.flat:
            miss("quotes", quoted)
    dates, date_spans = _dates(summary)
    for d in dates:
        if not src.has_date(d):
            miss("dates", "-".join(str(x) for x in d if x is not None))
    marks = [m.span() for m in _LIST_MARK.finditer(summary)]
    rest = _blank(summary, spans + date_spans + marks)
    for n in _NUMBER.findall(rest):
        if _number(n) not in src.numbers:
            miss("numbers", n)
    if names:
        for m in _CAPITALISED.finditer(rest):
            word = m[0].rstrip("'’-")
            low = word.lower().split("'")[0].split("’")[0]
            if low in COMMON or low in WEEKDAYS or low in MONTHS or low in NUMBER_WORDS:
                continue
            if src.has_word(word):
                continue
            if low in UNITS and _AFTER_NUMBER.search(rest[: m.start()]):
                continue  # "20 C": a unit, not a name
            opener = m.start() == 0 or bool(_SENTENCE_END.search(rest[: m.start()]))
            if opener and _VERBISH.search(low) and not _followed_by_name(rest, m.end()):
                continue  # a sentence's first word ("Planning", "Asked"): not a name
            miss("names", word)
    if not tool_succeeded and _RAN.search(summary):
        miss("tool results", "says code ran, but no tool call in these turns succeeded")
    return result


def _followed_by_name(text: str, end: int) -> bool:
    """Whether another capitalised word follows (a two-word name: 'John Doe')."""
    return bool(re.match(r"\s+[A-Z][a-z]", text[end : end + 4]))
