"""What of a chat template's markup a model wrote into its reply, taken out before anyone
reads it: the one place drafts and answers pass through (bot/agent/runner.py).

A small model that has seen tool calls and tool results in its training writes their
markup as text, in whatever form it learnt: `<tools><function name=… arguments='…'>`,
`<tool_call>`, `<tool_response>…</tool_response>` with no tool run, `<function=…>`, special
tokens `<|python_tag|>`, `[TOOL_CALLS]`, and copies of the `[context]` / `[earlier]` blocks
Sidekick adds to user turns (recorded: /work/shared/fixtures/llm/qwen2.5-coder-1.5b-day-
2026-12-06, excerpts in tests/fixtures/llm/day/). Forms are not listed one by one: a tag is
template markup when its name is made of the templates' words (tool, function, call,
invoke, arguments, …), a token is anything between `<|` and `|>`, a bracket marker is one of
Sidekick's blocks or an upper-case name of the same words. A call-like element goes with all
it holds (to its closing tag, or to the end when none comes); a result-like element
(`<tool_response>`) is the model imitating a result: it goes too, unless a tool really ran
in this request and what it wraps is prose (the model wrapping its real answer in the tag).
Code (fenced or inline) is left alone: a person asking about HTML gets their `<output>`.

`shown` is the text the person may read (a reply with nothing else is a failed call:
`failure`, and the loop asks once more); `repeats` says an answer is the person's question
given back.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

from bot.agent.prompt import without_context
from tools.chat import OnText

# The words template markup is made of; a name counts when one of its parts is one.
CALL_WORDS = frozenset(
    "tool tools toolcall toolcalls function functions functioncall invoke parameter "
    "parameters arguments args call calls".split()
)
RESULT_WORDS = frozenset("response responses result results output outputs observation".split())
# Sidekick's own blocks around user turns, and the lines inside them.
BLOCKS = frozenset({"context", "earlier"})
BLOCK_LINES = frozenset({"compressed", "not shown"})
# Upper-case markers (Mistral's [TOOL_CALLS], [ARGS], [INST]) share the words, plus these.
MARKER_WORDS = CALL_WORDS | RESULT_WORDS | frozenset({"inst", "available", "system"})

_TAG = re.compile(
    r"<(?P<close>/)?(?P<name>[A-Za-z_][\w.:-]*)"
    r"(?P<rest>=[^<>\n]*|(?:\s(?:[^<>\"']|\"[^\"]*\"|'[^']*')*)?)(?P<selfclose>/?)>"
)
_TOKEN = re.compile(r"<[|｜][^<>\n]{0,60}?[|｜]>")
_BRACKET = re.compile(r"\[(?P<close>/)?(?P<name>[A-Za-z][A-Za-z_ ]{1,24})\]")
_MARK = re.compile(
    re.sub(r"\(\?P<\w+>", "(?:", f"{_TOKEN.pattern}|{_TAG.pattern}|{_BRACKET.pattern}")
)
_CODE = re.compile(r"```.*?(?:```|\Z)|`[^`\n]+`", re.S)
_PARTS = re.compile(r"[_\-.: ]+")
_PARTIAL = re.compile(r"(?:<[|｜]?/?[\w.:|｜=-]*|\[/?[A-Za-z_ ]{0,24})\Z")
_BLANK_LINES = re.compile(r"\n[ \t]*\n(?:[ \t]*\n)+")
_PARAGRAPH_END = re.compile(r"\n[ \t]*\n|\Z")

# Words a question is made of besides what it asks about.
_FUNCTION_WORDS = frozenset(
    """a an the is are am was were be do does did can could would will shall should may
    might must have has had i me my mine you your yours we our it its he she his her they
    them their what which who whom whose when where why how there this that these those
    to of in on at for with about from by as and or but if so not no again please tell
    remind know remember told said say again still ever any some""".split()
)
_WORDS = re.compile(r"[^\W\d_]+|\d+", re.UNICODE)


def _kind(name: str) -> str | None:
    """'call', 'result' or None (no template word: an ordinary tag, left as it is)."""
    parts = set(_PARTS.split(name.lower()))
    if parts & CALL_WORDS:
        return "result" if parts & RESULT_WORDS and not parts & {"call", "calls"} else "call"
    return None


def _marker(name: str) -> str | None:
    """A bracket marker's kind: 'block' ([context]), 'line' ([compressed]), 'call',
    'result', or None (ordinary text in brackets)."""
    low = name.lower()
    if low in BLOCKS:
        return "block"
    if low in BLOCK_LINES:
        return "line"
    if name.isupper() and set(_PARTS.split(low)) & MARKER_WORDS:
        return "result" if set(_PARTS.split(low)) & RESULT_WORDS else "call"
    return None


def _prose(text: str) -> bool:
    body = text.strip()
    return bool(body) and body[0] not in "{[<"


def shown(text: str, *, results: bool = False, final: bool = True) -> str:
    """`text` without template markup. `results`: a tool ran in this request, so prose a
    result tag wraps is the model's answer. `final`: the reply is whole; else (a draft) an
    element still open hides what follows it, and a marker being written is held back."""
    if not final:
        text = _PARTIAL.sub("", text)
    out: list[str] = []
    pos = 0
    code = [m.span() for m in _CODE.finditer(text)]
    while (m := _MARK.search(text, pos)) is not None:
        inside = next(((a, b) for a, b in code if a <= m.start() < b), None)
        if inside is not None:
            out.append(text[pos : inside[1]])
            pos = inside[1]
            continue
        out.append(text[pos : m.start()])
        pos = _drop(text, m, out, results=results, final=final)
    out.append(text[pos:])
    return _BLANK_LINES.sub("\n\n", "".join(out)).strip()


def _drop(text: str, m: re.Match[str], out: list[str], *, results: bool, final: bool) -> int:
    """Where the text goes on after the markup `m` begins (what of it is kept: into out)."""
    whole = m.group()
    if _TOKEN.fullmatch(whole):
        return m.end()
    tag = _TAG.fullmatch(whole)
    if tag is not None:
        kind = _kind(tag["name"])
        if kind is None:
            out.append(whole)
            return m.end()
        if tag["close"] or tag["selfclose"]:
            return m.end()
        closing = re.compile(rf"</{re.escape(tag['name'])}\s*>", re.I)
    else:
        bracket = _BRACKET.fullmatch(whole)
        assert bracket is not None
        kind = _marker(bracket["name"])
        if kind is None:
            out.append(whole)
            return m.end()
        if bracket["close"]:
            return m.end()
        if kind == "line":
            return _PARAGRAPH_END.search(text, m.end()).start()  # type: ignore[union-attr]
        closing = re.compile(rf"\[/{re.escape(bracket['name'])}\]", re.I)
        if kind == "call" and not closing.search(text, m.end()):
            # [INST] stands alone; [TOOL_CALLS] is followed by its calls to the end.
            return len(text) if "call" in bracket["name"].lower() else m.end()
    end = closing.search(text, m.end())
    if end is None and not (final and kind == "result"):
        return len(text)  # still open: it holds the rest
    inner = text[m.end() : end.start() if end else len(text)]
    if kind == "result" and results and _prose(shown(inner)):
        out.append(shown(inner))
    return end.end() if end else len(text)


def repeats(answer: str, question: str) -> bool:
    """The answer is the person's question given back: a short question whose every word
    that asks something is one of theirs ("What am I allergic to?" to "What am I allergic
    to?"; "Where does my sister live?" to "Do you remember where my sister lives?")."""
    text = answer.strip()
    if not text.endswith("?") or len(text) > 200 or text.count("?") > 1:
        return False
    # Four letters: "live" is "lives", "allergic" is "allergy". A question back that asks
    # something of its own ("Which Ana?") has words of its own beside theirs.
    asked = {w[:4] for w in _WORDS.findall(question.lower())}
    every = _WORDS.findall(text.lower())
    words = [w for w in every if w not in _FUNCTION_WORDS]
    theirs = sum(w[:4] in asked for w in every)
    return bool(words) and all(w[:4] in asked for w in words) and theirs * 5 >= len(every) * 4


class Drafts:
    """An OnText for the streamed drafts that passes on only what `shown` lets through."""

    def __init__(self, on_text: OnText, *, results: bool) -> None:
        self.on_text = on_text
        self.results = results
        self.last = ""

    async def __call__(self, text: str) -> None:
        visible = shown(text, results=self.results, final=False)
        if visible and "\0" not in visible and f"\0{visible}" in _OURS_TEXT:
            return  # our own words given back (see failure), or not yet told apart from them
        if visible != self.last:
            self.last = visible
            await self.on_text(visible)


# What the model is told when its reply could not be shown, before it is asked once more
# (only in that request: never stored, so no later turn copies it).
UNREAD = "(no readable reply)"
ASK_AGAIN = {
    "markup": "Your last reply was only tool-call markup, written as text: it could "
    "not be read, nothing ran and the user saw nothing. To use a tool, call it through the "
    "tools you are given; otherwise answer the user's message in plain words.",
    "echo": "Your last reply only repeated the user's question. Answer it: use a "
    "tool if you need one, or say plainly that you do not know.",
    "copy": "Your last reply was word for word your answer to an earlier message. Answer "
    "this message itself: use a tool if it needs one, or answer in plain words.",
    "empty": "Your last reply was empty: the user saw nothing. Answer their message in plain "
    "words (from the tool results, if you used a tool), or use a tool if it needs one.",
    "ours": "Your last reply gave back what Sidekick told you, not an answer. Answer the "
    "user's own message in plain words.",
}


_QUOTED = (
    "call as text among other words: it did not run, and the user saw nothing. To use the "
    "tool, reply with the call alone; otherwise answer the user's message in plain words."
)


def ask_again(names: list[str]) -> str:
    """What the model is told when its reply wrote calls of `names` among its own words:
    such a call is not run (a call only quoted must never run), and not shown. (Not the
    call itself: written alone after that, it would read as copied from this message.)"""
    tools = ", ".join(f"`{n}`" for n in dict.fromkeys(names))
    return f"Your last reply wrote a {tools} {_QUOTED}"


# What Sidekick itself says to the model about its reply: given back, it is no answer (the
# 0.5B model answered with the placeholder; held, the 1.5B with "Your last reply was empty:
# the user saw nothing.", bench/tool_use.py --day, 2026-12-06).
_OURS = (UNREAD, *ASK_AGAIN.values(), _QUOTED)
# The same, each after a NUL: a text without one that begins one of them (or sits inside
# one) is found with one search, as each draft is read.
_OURS_TEXT = "".join(f"\0{o}" for o in _OURS)
# Shorter than this, a piece of our words may well be the model's own ("Nothing ran.").
_OURS_CHARS = 24


def ours(text: str) -> bool:
    """`text` is Sidekick's own words to the model (or a piece of them) given back."""
    body = text.strip()
    return body == UNREAD or (len(body) >= _OURS_CHARS and "\0" not in body and body in _OURS_TEXT)


# The line the person reads when the second reply failed the same way.
GAVE_UP = {
    "markup": "(The model answered only with tool-call markup it could not use, twice; "
    "nothing was done. Try asking again in other words.)",
    "echo": "(The model only repeated your question, twice. Try asking again in other words.)",
    "ours": "(The model gave no answer, twice. Try asking again in other words.)",
}


# The fewest words an answer copied from an earlier one must have to count ("Noted." and
# "You're welcome!" may well be said twice).
COPY_WORDS = 5


def answered(messages: Iterable[dict[str, Any]]) -> Iterator[tuple[Any, str]]:
    """The answers in `messages` (an assistant's text without calls), each with the person's
    message it answered as the prompt shows it."""
    asked: Any = ""
    for m in messages:
        if m.get("role") == "user":
            asked = m.get("content")
        elif m.get("role") == "assistant" and m.get("content") and not m.get("tool_calls"):
            yield asked, str(m["content"])


def copies(answer: str, question: str, earlier: Iterable[tuple[Any, str]]) -> bool:
    """The answer is word for word one given to an earlier, other message (`earlier`: the
    person's message as the prompt shows it, and the answer it got): a small model copies
    its last answer into every later one (the 1.5B model answered eleven messages of the
    recorded day with "I'm sorry, but I can't assist with that."). The same question asked
    again may well get the same answer."""
    words = _WORDS.findall(answer.lower())
    if len(words) < COPY_WORDS:
        return False
    asked = _WORDS.findall(question.lower())
    # Split into words only the earlier answers that hold the first and the last word: a
    # long session's every answer is read at every message.
    first, last = words[0], words[-1]
    return any(
        first in (low := a.lower())
        and last in low
        and _WORDS.findall(low) == words
        and _WORDS.findall(str(without_context(q)).lower()) != asked
        for q, a in earlier
    )


def failure(raw: str, text: str, question: str) -> str | None:
    """Why a reply is no answer: 'markup' (all of it template markup), 'echo' (the person's
    question given back), 'empty' (nothing at all: a small model copies an empty answer in
    its history into every later one), 'ours' (what Sidekick told the model about its last
    reply, given back), or None."""
    if not raw.strip():
        return "empty"
    # The placeholder the model was shown for its unread reply, given back (the 0.5B model
    # did, asked again after copying the [context] block): Sidekick's text, not an answer.
    if not text or text == UNREAD:
        return "markup"
    if ours(text):
        return "ours"
    if text and repeats(text, question):
        return "echo"
    return None
