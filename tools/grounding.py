"""The cheap half of checking a summary: what it names must occur in what it summarises.

A small model invents in a recognisable way: a name nobody said, a number no tool produced,
a date, a link. So every name, number, date, URL and quoted string in the summary must occur
in the source turns (after normalising "1,000" = "1000", "2023-05-07" = "7 May 2023"), and a
summary that says code ran needs a tool result that succeeded; paraphrase passes. The model
reviewer (SUMMARY_REVIEW=model) is the second, costlier opinion.
"""

from __future__ import annotations

import datetime
import functools
import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

# Each month and weekday by its name and its first three letters ("sept" too).
MONTHS = {
    n: i
    for i, name in enumerate(
        "january february march april may june july august september october november "
        "december".split(),
        1,
    )
    for n in (name, name[:3])
} | {"sept": 9}
WEEKDAYS = frozenset(
    n
    for day in "monday tuesday wednesday thursday friday saturday sunday".split()
    for n in (day, day[:3])
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
    r"\b(?P<day>\d{1,2})(?:st|nd|rd|th)?(?:\s+of)?\s+(?P<month>[A-Za-z]{3,9})\.?"
    r"(?:,?\s+(?P<year>\d{4}))?",
    re.I,
)
_MONTH_DAY = re.compile(
    r"\b(?P<month>[A-Za-z]{3,9})\.?\s+(?P<day>\d{1,2})(?:st|nd|rd|th)?\b(?:,?\s+(?P<year>\d{4}))?",
    re.I,
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
_NAME_NEXT = re.compile(r"\s+[A-Z][a-z]")  # another capitalised word: a name ("John Doe")
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
    for named in (_DAY_MONTH, _MONTH_DAY):  # a month's name: 0 for any other word
        for m in named.finditer(text):
            said = int(m["year"]) if m["year"] else None
            add(said, MONTHS.get(m["month"].lower(), 0), int(m["day"]), m.span())
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
            if opener and _VERBISH.search(low) and not _NAME_NEXT.match(rest, m.end(), m.end() + 4):
                continue  # a sentence's first word ("Planning", "Asked"): not a name
            miss("names", word)
    if not tool_succeeded and _RAN.search(summary):
        miss("tool results", "says code ran, but no tool call in these turns succeeded")
    return result


# Scripts whose Unicode names differ but which one language mixes (Japanese).
_SCRIPT_ALIASES = {"HIRAGANA": "CJK", "KATAKANA": "CJK", "IDEOGRAPHIC": "CJK"}

STOPWORDS: dict[str, frozenset[str]] = {
    "English": frozenset(
        "the and is are was were to of in that it you i for on with this have be not "
        "what we he she they my your but at from about will would can".split()
    ),
    "German": frozenset(
        "der die das und ist sind war nicht ich du sie wir ein eine mit für auf zu den "
        "dem des auch es im von wie aber noch wird hat haben".split()
    ),
    "French": frozenset(
        "le la les et est sont était je tu il elle nous vous un une des du de pour pas "
        "que qui dans sur avec mais ce cette au aux".split()
    ),
    "Spanish": frozenset(
        "el la los las y es son era yo tú él ella nosotros un una de del para no que en "
        "con por pero se lo como más muy está".split()
    ),
    "Italian": frozenset(
        "il lo la gli le e è sono era io tu lui lei noi un una di del per non che in con "
        "ma si come più anche questo della".split()
    ),
    "Portuguese": frozenset(
        "o a os as e é são era eu tu ele ela nós um uma de do da para não que em com por "
        "mas se como mais muito está isso".split()
    ),
    "Dutch": frozenset(
        "de het een en is zijn was ik jij je hij zij wij we niet dat die in op met voor "
        "van maar ook er naar om bij".split()
    ),
}

# Letters only, for the stop-word count (the checks' _WORD keeps apostrophes and hyphens).
_LETTERS = re.compile(r"[^\W\d_]+", re.UNICODE)


def script_of(text: str) -> str | None:
    """The Unicode script most of the letters belong to (LATIN, CYRILLIC, CJK, ...)."""
    counts: Counter[str] = Counter()
    # Each distinct character looked up once, in order of first appearance (so a tie goes
    # to the script seen first, as letter by letter): a session summary's check reads a
    # whole conversation, ~10 ms letter by letter.
    for ch, n in Counter(text).items():
        script = _script(ch)
        if script is not None:
            counts[script] += n
    if not counts:
        return None
    return counts.most_common(1)[0][0]


@functools.lru_cache(maxsize=4096)
def _script(ch: str) -> str | None:
    if not ch.isalpha():
        return None
    name = unicodedata.name(ch, "")
    if not name:
        return None
    first = name.split()[0]
    return _SCRIPT_ALIASES.get(first, first)


def latin_language(text: str) -> str | None:
    """The stop-word list that best covers the text; None when nothing stands out."""
    words = [w.lower() for w in _LETTERS.findall(text)]
    if len(words) < 4:
        return None
    scores = {lang: sum(w in stop for w in words) for lang, stop in STOPWORDS.items()}
    ranked = sorted(scores.items(), key=lambda kv: kv[1], reverse=True)
    (best, top), (_, second) = ranked[0], ranked[1]
    # At least a few hits, and clearly ahead (many short words are shared).
    if top >= 3 and top >= max(2, len(words) // 20) and top > second * 1.3:
        return best
    return None


def language_of(text: str) -> str | None:
    """A label such as 'German' or 'CYRILLIC'; None when unclear."""
    script = script_of(text)
    if script == "LATIN":
        return latin_language(text) or "LATIN"
    return script


def checks_names(words: str) -> bool:
    """Whether capitalised words are read as names (German capitalises every noun)."""
    return language_of(words) != "German"


_STEMMED = re.compile(r"[^\W\d_]{4,}", re.UNICODE)
NOT_WORDS = frozenset({"user", "users"})  # how a fact names the user, not what it says


def stems(text: str) -> set[str]:
    """Words of four letters or more by their first four ("lives" = "live")."""
    return {w.lower()[:4] for w in _STEMMED.findall(text) if w.lower() not in NOT_WORDS}


def in_their_words(fact: str, theirs: Sequence[str]) -> bool:
    """Whether at least half of the fact's words are words the user wrote: a fact with no
    name or number for the grounding check ("wants every action approved without asking")
    must still be what the user said, not what a page made the model say."""
    words = stems(fact)
    said_words = set().union(*(stems(t) for t in theirs)) if theirs else set()
    return len(words & said_words) * 2 >= len(words)


# A memory about the person comes from the person (issue 46: "Marta is 20 years old" and
# "a reminder is still active" passed because the model's own turns said so). A summary's
# sentence about the person is checked against the person's words alone; a sentence about
# what Sidekick or a tool did may also draw on the tools' results; never on Sidekick's own
# words, which a small model invents. A sentence that says an action happened (a reminder
# set, a message sent) needs a call that did it in the record of actions.
_SENTENCES = re.compile(r"[^.!?;\n]+(?:[.!?;]+|\n|$)")
_NOT_ABOUT_THEM = re.compile(
    r"^\W*(?:sidekick|the assistant|assistant|it|the (?:search|result|results|code|tool|"
    r"program|page|web|answer|calculation|computation|output))\b",
    re.I,
)
# Words of actions that leave a record when they happen, by the stem the record must hold.
ACTIONS = {
    "remind": re.compile(r"\bremind(?:er|ers|ed|s|ing)?\b", re.I),
    "schedul": re.compile(r"\bschedul\w*", re.I),
    "alarm": re.compile(r"\balarms?\b", re.I),
    "sent": re.compile(r"\b(?:sent|emailed|messaged|texted|posted)\b", re.I),
    "book": re.compile(r"\bbooked\b", re.I),
    "cancel": re.compile(r"\bcancel(?:l?ed)\b", re.I),
    "delet": re.compile(r"\bdeleted\b", re.I),
}
# A sentence that reports a wish is no claim that it happened ("asked to be reminded").
_ASKED = re.compile(
    r"\b(?:ask(?:s|ed)?|want(?:s|ed)?|request(?:s|ed)?|would like|wish(?:es|ed)?|"
    r"plan(?:s|ned|ning)? to|needs? to|intend(?:s|ed)?)\b",
    re.I,
)


def claimed_actions(sentence: str) -> list[str]:
    """The actions a sentence says happened (their stems), none when it reports a wish."""
    if _ASKED.search(sentence):
        return []
    return [stem for stem, pattern in ACTIONS.items() if pattern.search(sentence)]


# Stems that say nothing of which action is meant ("will", "still", "sidekick").
_FILLER = frozenset("will stil also that this with from have been side their them they".split())


def _supports(stem: str, sentence: str, done: Sequence[str]) -> bool:
    """Whether a call in `done` did the action `stem` a sentence claims: its record holds
    the stem and at least half of what else the sentence says of it ("reminder ... take
    the laundry out" needs a reminder about the laundry, not one about dinner)."""
    about = stems(sentence) - _FILLER - {stem[:4]}
    return any(
        stem in entry.lower() and len(about & stems(entry)) * 2 >= len(about) for entry in done
    )


def check_grounded(
    summary: str,
    theirs: Source,
    record: Source,
    actions: Sequence[str],
    *,
    tool_succeeded: bool = True,
    names: bool = True,
) -> Grounding:
    """What in `summary` its sources do not say: a sentence about the person against
    `theirs` (their own words), any other against `record` (those and the tools' results),
    and an action a sentence says happened against `actions` (the successful calls)."""
    result = Grounding()
    for m in _SENTENCES.finditer(summary):
        if not (sentence := m.group().strip()):
            continue
        # About the person: anything not opening with Sidekick, a tool or a result.
        found = check(
            sentence,
            record if _NOT_ABOUT_THEM.match(sentence) else theirs,
            tool_succeeded=tool_succeeded,
            names=names,
        )
        for kind, items in found.missing.items():
            have = result.missing.setdefault(kind, [])
            have += [i for i in items if i not in have]
        for stem in claimed_actions(sentence):
            if not _supports(stem, sentence, actions):
                what = "a reminder no call set" if stem == "remind" else f"no call {stem}…"
                result.missing.setdefault("actions", []).append(f"{what}: {sentence[:80]}")
    return result
