"""Summarise these turns, then verify: the one service behind archive and compression.

A closed session's summary (bot/sessions/archive.py, kept as a memory) and a long session's
oldest turns (bot/sessions/history.py, standing in for them in the prompt) are written the
same way: one transcript of the turns, one model call with the caller's instruction and
one size rule, and one verification: not empty, not too long, in the conversation's
language, and grounded (bot/sessions/grounding.py: every name, number, date, link and quote
it states occurs in the turns); with SUMMARY_REVIEW=model also a reviewer call in a fresh
context. A summary that fails is asked for once more, naming the problem. The callers
keep only what differs: the instruction, and where the result goes.

The language check is deliberately cheap: the dominant Unicode script of the letters,
and for Latin-script text the best-scoring stop-word list. It catches the failure that
matters (a model answering in English about a German conversation) without a model.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from bot.sessions.grounding import Source, check
from db.models.core import Message
from tools.base import TextModel
from tools.model_call import ModelCall

log = logging.getLogger(__name__)

Review = Literal["model", "grounding", "off"]

MIN_CHARS = 20
MAX_CHARS = 1500
CHARS_PER_WORD = 10  # an instruction's "at most N words" is checked as N * 10 characters
MAX_TURN_CHARS = 2000  # of one turn in a transcript
CHARS_PER_TOKEN = 4  # the size rule's measure: what a summary call reads, in tokens
DEFAULT_BUDGET = 6000  # tokens of turns one summary call reads (HISTORY_TOKEN_BUDGET's default)
HEAD_SHARE = 6  # a transcript cut in the middle keeps 1/6 of its room for the start
SUMMARY_MAX_TOKENS = 600
# The time one summary call may take. A summary reads up to DEFAULT_BUDGET tokens of turns:
# ~2,300 tokens with 600 out take 120-200 s on 2 CPU cores, past LLM_TIMEOUT_S's 120 s
# default, so the floor is well above it; a server measured slower than that gets three
# times what its speed predicts, up to the ceiling (the model client's own deadline for
# summary calls, bot/app.py).
SUMMARY_MIN_S = 600.0
SUMMARY_MAX_S = 1800.0


class Pace:
    """How fast the model server got through the last summary calls (tokens read and
    written per second, by the summary's size rule), and the time budget that follows."""

    def __init__(self) -> None:
        self.rate: float | None = None

    def budget(self, tokens: int) -> float:
        if not self.rate:
            return SUMMARY_MIN_S
        return min(SUMMARY_MAX_S, max(SUMMARY_MIN_S, 3 * tokens / self.rate))

    def seen(self, tokens: int, seconds: float) -> None:
        rate = tokens / max(seconds, 0.001)
        self.rate = rate if self.rate is None else (self.rate + rate) / 2


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


def check_summary(summary: str, conversation: str, max_chars: int = MAX_CHARS) -> str | None:
    """None when the summary may be kept, else the reason it may not."""
    text = summary.strip()
    if len(text) < MIN_CHARS:
        return "the summary is empty or too short"
    if len(text) > max_chars:
        return f"the summary is too long ({len(text)} characters, at most {max_chars})"
    want, got = script_of(conversation), script_of(text)
    if want and got and want != got:
        return f"the summary is in {got.title()} script, the conversation in {want.title()}"
    if want == "LATIN" and got == "LATIN":
        want_lang, got_lang = latin_language(conversation), latin_language(text)
        if want_lang and got_lang and want_lang != got_lang:
            return f"the summary is in {got_lang}, the conversation in {want_lang}"
    return None


FACTS_PROMPT = """
Then, only if the user stated lasting things about themselves (facts, preferences, \
relationships, goals, plans, projects), add a line "FACTS:" and under it one line each: \
"- category: the fact in the third person" (category is one of fact, preference, \
relationship, goal, plan, project). Leave FACTS out when there are none."""
FACT_CATEGORIES = ("fact", "preference", "relationship", "goal", "plan", "project")
MAX_FACTS = 8
MAX_FACT_CHARS = 300

REVIEW = """You check a summary of conversation turns. Reply PASS if every statement in \
the summary is supported by the turns, else FAIL and the unsupported statement."""

_FACTS = re.compile(r"^\s*\**FACTS:?\**\s*$", re.I | re.M)
_FACT_LINE = re.compile(r"^\s*[-*•]\s*([a-z]+)\s*:\s*(.+?)\s*$", re.I)


@dataclass(frozen=True)
class Ask:
    """What a caller wants written: its instruction (with "{language}" in it), the length
    it asks for (repeated when asking again), whether tool calls and results are shown,
    and whether a FACTS list may follow the summary."""

    instruction: str
    lead: str
    words: int
    tools: bool = False
    facts: bool = False

    @property
    def max_chars(self) -> int:
        return self.words * CHARS_PER_WORD


@dataclass
class Fact:
    category: str
    content: str


@dataclass
class Summary:
    """The model's last summary and, when it may not be kept, why (`problem`); `invented`
    when the last problem was that it states what the turns do not."""

    text: str
    facts: list[Fact] = field(default_factory=list)
    problem: str | None = None
    invented: bool = False
    failed: bool = False  # the model call itself failed

    @property
    def ok(self) -> bool:
        return self.problem is None


def said(messages: Sequence[Message]) -> str:
    """The user's own words: what decides the language and whether names are checked."""
    return "\n".join(m.content for m in messages if m.role == "user" and m.content.strip())


def checks_names(words: str) -> bool:
    """Whether capitalised words are read as names (German capitalises every noun)."""
    return language_of(words) != "German"


def _stamp(m: Message) -> str:
    # The day only: a summary may resolve "tomorrow", but the hours and minutes of every
    # turn would let nearly any small number pass the grounding check.
    return f"{m.created_at:%Y-%m-%d} " if m.created_at is not None else ""


def turn_line(m: Message, *, tools: bool) -> str | None:
    """One turn as the summariser reads it; None for what it does not see (tool calls and
    results unless `tools`, empty turns)."""
    text = (m.content or "").strip()
    if m.role == "assistant" and m.tool_calls and not text and tools:
        text = f"(calls tools: {m.tool_calls[:300]})"
    who = {"user": "User", "assistant": "Sidekick"}.get(m.role)
    if m.role == "tool" and tools:
        who = "Tool result"
    if who is None or not text:
        return None
    if len(text) > MAX_TURN_CHARS:
        text = text[:MAX_TURN_CHARS] + " […]"
    return f"{_stamp(m)}{who}: {text}"


def line_cost(m: Message, *, tools: bool) -> int:
    """What one turn takes of a summary call's budget, in tokens (the size rule)."""
    line = turn_line(m, tools=tools)
    return 0 if line is None else (len(line) + 2) // CHARS_PER_TOKEN + 1


def transcript(
    messages: Sequence[Message], *, tools: bool = False, budget: int = DEFAULT_BUDGET
) -> str:
    """The turns, oldest first, within `budget` tokens: the middle is cut when longer."""
    lines = [line for m in messages if (line := turn_line(m, tools=tools)) is not None]
    full = "\n\n".join(lines)
    room = budget * CHARS_PER_TOKEN
    if len(full) <= room:
        return full
    head = room // HEAD_SHARE
    return full[:head] + "\n\n[… part of the conversation omitted …]\n\n" + full[-(room - head) :]


def grounding_source(messages: Sequence[Message], before: str = "") -> tuple[Source, bool]:
    """What a summary may draw on: an earlier summary it continues, the user's and
    Sidekick's words, the results of tool calls that succeeded and when the turns were
    sent; and whether any tool call succeeded (failed calls' arguments and errors are not
    facts about the user)."""
    parts, ok = [before] if before else [], False
    for m in messages:
        if m.role == "tool":
            if m.content.startswith("Error:"):
                continue
            ok = True
        parts.append(f"{_stamp(m)}{m.content}")
    return Source("\n".join(parts)), ok


def split_facts(text: str) -> tuple[str, list[Fact]]:
    """The summary and the facts listed after it."""
    parts = _FACTS.split(text, maxsplit=1)
    summary = parts[0].strip()
    facts: list[Fact] = []
    if len(parts) == 2:
        for line in parts[1].splitlines():
            m = _FACT_LINE.match(line)
            if m and m[1].lower() in FACT_CATEGORIES and len(m[2]) <= MAX_FACT_CHARS:
                facts.append(Fact(m[1].lower(), m[2]))
    return summary, facts[:MAX_FACTS]


class Summariser:
    """Writes a summary of turns with one model call and verifies it; asks once more,
    naming the problem, when it does not pass."""

    def __init__(
        self,
        llm: TextModel,
        review: Review = "grounding",
        budget: int = DEFAULT_BUDGET,
        pace: Pace | None = None,
    ) -> None:
        self.llm = llm
        self.review = review
        self.budget = budget
        self.pace = pace or Pace()

    async def _write(self, request: list[dict[str, Any]], call: ModelCall) -> str:
        """One summary call within its time budget; abandoned (the request cancelled, the
        connection closed) when the budget runs out."""
        tokens = sum(len(str(m["content"])) for m in request) // CHARS_PER_TOKEN
        tokens += SUMMARY_MAX_TOKENS
        budget = self.pace.budget(tokens)
        started = time.monotonic()
        try:
            async with asyncio.timeout(budget):
                text = await self.llm.complete_text(
                    request, max_tokens=SUMMARY_MAX_TOKENS, call=call
                )
        except TimeoutError:
            log.warning("a summary call took longer than its %g s budget: abandoned", budget)
            raise TimeoutError(f"no summary within its {budget:g} s budget") from None
        out = (text or "").strip()
        self.pace.seen(tokens - SUMMARY_MAX_TOKENS + len(out) // CHARS_PER_TOKEN,
                       time.monotonic() - started)  # fmt: skip
        return out

    async def summarise(
        self, ask: Ask, messages: Sequence[Message], call: ModelCall, *, before: str = ""
    ) -> Summary:
        """`before`: an earlier summary these turns continue (it is summarised with them)."""
        words = said(messages)
        language = describe(language_of(words))
        turns = before + transcript(messages, tools=ask.tools, budget=self.budget)
        source, tool_ok = grounding_source(messages, before)
        instruction = ask.instruction.format(language=language)
        base = [
            {"role": "system", "content": instruction + (FACTS_PROMPT if ask.facts else "")},
            {"role": "user", "content": ask.lead + turns},
        ]
        request, result = base, Summary("")
        for _ in range(2):
            try:
                text = await self._write(request, call)
            except Exception as exc:
                problem = f"model failed: {type(exc).__name__}: {exc}"
                return Summary("", problem=problem[:300], failed=True)
            text, facts = split_facts(text) if ask.facts else (text, [])
            result = await self.verify(ask, text, turns, words, source, tool_ok, call)
            result.facts = facts
            if result.ok:
                return result
            request = [
                *base,
                {"role": "assistant", "content": text[: ask.max_chars * 2]},
                {
                    "role": "user",
                    "content": f"That will not do: {result.problem}. Write it again, in "
                    f"{language}, at most {ask.words} words.",
                },
            ]
        return result

    async def verify(
        self,
        ask: Ask,
        text: str,
        turns: str,
        words: str,
        source: Source,
        tool_ok: bool,
        call: ModelCall | None = None,
    ) -> Summary:
        """The summary, with why it may not be kept when it may not."""
        problem = check_summary(text, words, ask.max_chars)
        if problem or self.review == "off":
            return Summary(text, problem=problem)
        grounded = check(text, source, tool_succeeded=tool_ok, names=checks_names(words))
        if not grounded.ok:
            why = f"it states what the turns do not ({grounded.reason()})"
            return Summary(text, problem=why, invented=True)
        if self.review == "model":
            return Summary(text, problem=await self._reviewed(text, turns, call))
        return Summary(text)

    async def _reviewed(self, text: str, turns: str, call: ModelCall | None) -> str | None:
        # A fresh context: the reviewer sees only the turns and the summary.
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": REVIEW},
            {"role": "user", "content": f"Turns:\n{turns}\n\nSummary:\n{text}"},
        ]
        try:
            verdict = await self.llm.complete_text(messages, max_tokens=60, call=call)
        except Exception as exc:
            return f"reviewer failed: {type(exc).__name__}"
        verdict = (verdict or "").strip()
        return None if verdict.upper().startswith("PASS") else f"reviewer: {verdict[:200]}"
