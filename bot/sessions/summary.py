"""Summarise turns, then verify: the one service behind archive and compression. One model
call with the caller's instruction and size rule; the summary must be non-empty, short
enough, in the conversation's language and grounded (tools/grounding.py: what it says of the
person is in their own words, of a tool's work in the tools' results, never in Sidekick's);
with SUMMARY_REVIEW=model a reviewer checks it too. A failed one is asked for once more.
The language check is cheap on purpose (the dominant script, then stop words): it catches a
model answering in English about a German conversation without a model call."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol

from bot.agent.prompt import StoredMessage
from tools.base import TextModel
from tools.effects import OUTSIDE_MARK
from tools.grounding import (
    Source,
    check_grounded,
    checks_names,
    language_of,
    latin_language,
    script_of,
)
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
# The time one summary call may take: well above LLM_TIMEOUT_S (a summary's turns can take
# 120-200 s on 2 CPU cores); a server measured slower gets three times what its speed
# predicts, up to the ceiling (the deadline of the summaries' own model client).
SUMMARY_MIN_S = 600.0
SUMMARY_MAX_S = 1800.0


@dataclass
class Pace:
    """The model server's speed on the last summary calls, and the time budget it gives."""

    rate: float | None = None

    def budget(self, tokens: int) -> float:
        if not self.rate:
            return SUMMARY_MIN_S
        return min(SUMMARY_MAX_S, max(SUMMARY_MIN_S, 3 * tokens / self.rate))

    def seen(self, tokens: int, seconds: float) -> None:
        rate = tokens / max(seconds, 0.001)
        self.rate = rate if self.rate is None else (self.rate + rate) / 2


def describe(label: str | None) -> str:
    if label is None or label == "LATIN":
        return "the language the user wrote in"
    if label.isupper():
        return f"the language the user wrote in ({label.title()} script)"
    return label


def check_summary(summary: str, conversation: str, max_chars: int = MAX_CHARS) -> str | None:
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
    instruction: str  # with "{language}" in it
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
    """`invented`: the last problem was stating what the turns do not."""

    text: str
    facts: list[Fact] = field(default_factory=list)
    problem: str | None = None
    invented: bool = False
    failed: bool = False  # the model call itself failed

    @property
    def ok(self) -> bool:
        return self.problem is None


def said(messages: Sequence[Turn]) -> str:
    """The user's own words: what decides the language and whether names are checked."""
    return "\n".join(m.content for m in messages if m.role == "user" and m.content.strip())


class Turn(StoredMessage, Protocol):
    """An ORM Message or a history row."""

    @property
    def created_at(self) -> datetime | None: ...


def _stamp(m: Turn) -> str:
    # The day only: a summary may resolve "tomorrow", but the hours and minutes of every
    # turn would let nearly any small number pass the grounding check.
    return f"{m.created_at:%Y-%m-%d} " if m.created_at is not None else ""


def turn_line(m: Turn, *, tools: bool) -> str | None:
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


def line_cost(m: Turn, *, tools: bool) -> int:
    """What one turn takes of a summary call's budget, in tokens (the size rule)."""
    line = turn_line(m, tools=tools)
    return 0 if line is None else (len(line) + 2) // CHARS_PER_TOKEN + 1


def transcript(
    messages: Sequence[Turn], *, tools: bool = False, budget: int = DEFAULT_BUDGET
) -> str:
    lines = [line for m in messages if (line := turn_line(m, tools=tools)) is not None]
    full = "\n\n".join(lines)
    room = budget * CHARS_PER_TOKEN
    if len(full) <= room:
        return full
    head = room // HEAD_SHARE
    return full[:head] + "\n\n[… part of the conversation omitted …]\n\n" + full[-(room - head) :]


@dataclass
class Grounds:
    """What a summary may draw on (check_grounded): `theirs`, the person's own words (not
    outside content) and an earlier summary; `record`, those and successful tools' results;
    `actions`, those calls. Never Sidekick's own words: a small model states there what
    never happened."""

    theirs: Source
    record: Source
    actions: list[str]
    tool_ok: bool


def grounding_source(messages: Sequence[Turn], before: str = "") -> Grounds:
    theirs, results, actions, ok = [before] if before else [], [], [], False
    asked: dict[str, str] = {}  # a call's id: its name and arguments
    for m in messages:
        if m.role == "user":
            own = m.content.partition(OUTSIDE_MARK)[0]
            theirs.append(f"{_stamp(m)}{own}")
        elif m.role == "assistant" and m.tool_calls:
            for c in _calls(m.tool_calls):
                asked[str(c.get("id"))] = json.dumps(c.get("function") or {}, ensure_ascii=False)
        elif m.role == "tool" and not m.content.startswith("Error:"):
            ok = True
            results.append(f"{_stamp(m)}{m.content}")
            actions.append(f"{asked.get(str(m.tool_call_id), '')} {m.content}")
    person = "\n".join(theirs)
    return Grounds(Source(person), Source("\n".join([person, *results])), actions, ok)


def _calls(raw: str) -> list[dict[str, Any]]:
    try:
        calls = json.loads(raw)
    except ValueError:
        return []
    return [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []


def split_facts(text: str) -> tuple[str, list[Fact]]:
    parts = _FACTS.split(text, maxsplit=1)
    summary = parts[0].strip()
    facts: list[Fact] = []
    if len(parts) == 2:
        for line in parts[1].splitlines():
            m = _FACT_LINE.match(line)
            if m and m[1].lower() in FACT_CATEGORIES and len(m[2]) <= MAX_FACT_CHARS:
                facts.append(Fact(m[1].lower(), m[2]))
    return summary, facts[:MAX_FACTS]


@dataclass
class Summariser:
    llm: TextModel
    review: Review = "grounding"
    budget: int = DEFAULT_BUDGET
    pace: Pace = field(default_factory=Pace)

    async def _write(self, request: list[dict[str, Any]], call: ModelCall) -> str:
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
        self, ask: Ask, messages: Sequence[Turn], call: ModelCall, *, before: str = ""
    ) -> Summary:
        """`before`: an earlier summary these turns continue (it is summarised with them)."""
        words = said(messages)
        language = describe(language_of(words))
        turns = before + transcript(messages, tools=ask.tools, budget=self.budget)
        grounds = grounding_source(messages, before)
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
            result = await self.verify(ask, text, turns, words, grounds, call)
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
        grounds: Grounds,
        call: ModelCall | None = None,
    ) -> Summary:
        problem = check_summary(text, words, ask.max_chars)
        if problem or self.review == "off":
            return Summary(text, problem=problem)
        grounded = check_grounded(
            text,
            grounds.theirs,
            grounds.record,
            grounds.actions,
            tool_succeeded=grounds.tool_ok,
            names=checks_names(words),
        )
        if not grounded.ok:
            why = f"it states what the user did not say or no call did ({grounded.reason()})"
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
