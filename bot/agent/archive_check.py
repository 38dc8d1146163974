"""Checking a session summary before it is kept: not empty, not too long, same language.

The language check is deliberately cheap: the dominant Unicode script of the letters,
and for Latin-script text the best-scoring stop-word list. It catches the failure that
matters (a model answering in English about a German conversation) without a model.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter

MIN_CHARS = 20
MAX_CHARS = 1500

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

_WORD = re.compile(r"[^\W\d_]+", re.UNICODE)


def script_of(text: str) -> str | None:
    """The Unicode script most of the letters belong to (LATIN, CYRILLIC, CJK, ...)."""
    counts: Counter[str] = Counter()
    for ch in text:
        if not ch.isalpha():
            continue
        name = unicodedata.name(ch, "")
        if not name:
            continue
        first = name.split()[0]
        counts[_SCRIPT_ALIASES.get(first, first)] += 1
    if not counts:
        return None
    return counts.most_common(1)[0][0]


def latin_language(text: str) -> str | None:
    """The stop-word list that best covers the text; None when nothing stands out."""
    words = [w.lower() for w in _WORD.findall(text)]
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


def describe(label: str | None) -> str:
    if label is None or label == "LATIN":
        return "the language the user wrote in"
    if label.isupper():
        return f"the language the user wrote in ({label.title()} script)"
    return label


def check_summary(summary: str, conversation: str) -> str | None:
    """None when the summary may be kept, else the reason it may not."""
    text = summary.strip()
    if len(text) < MIN_CHARS:
        return "the summary is empty or too short"
    if len(text) > MAX_CHARS:
        return f"the summary is too long ({len(text)} characters, at most {MAX_CHARS})"
    want, got = script_of(conversation), script_of(text)
    if want and got and want != got:
        return f"the summary is in {got.title()} script, the conversation in {want.title()}"
    if want == "LATIN" and got == "LATIN":
        want_lang, got_lang = latin_language(conversation), latin_language(text)
        if want_lang and got_lang and want_lang != got_lang:
            return f"the summary is in {got_lang}, the conversation in {want_lang}"
    return None
