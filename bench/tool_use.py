"""How often the real small model uses a tool, and answers right, on everyday requests.

A fixed set of 20 requests (remember X, what is X, compute, how many days until, remind me,
list my reminders) goes through the assembled app (build_app, the real agent and tools, the
real LLM client) to llama-server with the chat model of `make test-real` (installed by
`python scripts/real_llm.py`), each in a fresh session of one user (memories stay, as they
would). For each request it prints whether the tool it needs was called (sent as a tool call,
or written out as text and run: bot/llm/written.py) and whether the answer was right (the
expected words in the reply, or for "remember"/"remind me" the tool having stored it). Then
the two rates, and the empty-chat prompt's tokens as the model's tokenizer counts them.

Usage: python bench/tool_use.py [--only N ...] [--max-tokens 160] [--show]
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
from bot.agent.runner import Incoming
from bot.sessions.lifecycle import start_new_session
from tests.real.proxy import Exchange
from tests.real.servers import LlamaServer
from tools.errors import ProviderError

USER = 4243


@dataclass
class Case:
    text: str
    tool: str  # the tool the request needs
    answer: str = ""  # a regex the reply must match (case-insensitive)
    effect: str = ""  # or: a regex one of the tool results must match (stored, scheduled)


CASES = [
    Case("Remember that my sister's name is Ana.", "memory", effect=r"^(stored|updated) #"),
    Case("Remember that I am allergic to penicillin.", "memory", effect=r"^(stored|updated) #"),
    Case("Please remember: my favourite colour is green.", "memory", effect=r"^(stored|updated) #"),
    Case("Remember that I live in Lisbon.", "memory", effect=r"^(stored|updated) #"),
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
    Case("Remind me every day at 8:00 to drink water.", "schedule", effect=r"^Scheduled"),
    Case("List my reminders.", "schedule", answer=r"stretch|mom|water"),
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
    last_user = max(i for i, m in enumerate(messages) if m.get("role") == "user")
    turn = messages[last_user + 1 :]
    functions = [c["function"] for m in turn for c in m.get("tool_calls") or []]
    return functions, [str(m.get("content")) for m in turn if m.get("role") == "tool"]


async def run(
    server: LlamaServer, name: str, cases: list[Case], max_tokens: int, show: bool = False
) -> list[Outcome]:
    out: list[Outcome] = []
    async with assembled(
        server, name, max_tokens, llm_max_output_tokens=max_tokens, llm_timeout_s=3000.0,
        approvals="off",  # nobody is there to say yes: the model's choices are measured
    ) as (app, proxy):  # fmt: skip
        for case in cases:
            await start_new_session(
                app.session_factory, app.deps.clock, telegram_user_id=USER,
                user_name="Ana",
            )  # fmt: skip
            before = len(proxy.chats())
            started = time.monotonic()
            try:
                reply = await app.agent.handle(
                    Incoming(case.text, telegram_user_id=USER, user_name="Ana")
                )
                await reply.delivered()
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
            mark = "tool " + ("yes" if case.tool in called else "no ")
            mark += " (sent)" if done.sent else " (text)" if called else ""
            print(f"  {mark}  right {'yes' if right else 'no '}  {done.seconds:5.0f} s  "
                  f"{case.text[:48]:<48} -> {' '.join(text.split())[:70]!r}",
                  file=sys.stderr, flush=True)  # fmt: skip
            if show:
                for f, result in zip(functions, results, strict=False):
                    call = f"{f['name']}({f['arguments']})"
                    print(f"      {call[:150]!r}\n        -> {result[:150]!r}", file=sys.stderr)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", type=int, nargs="*", help="case numbers (1-based)")
    parser.add_argument("--max-tokens", type=int, default=160)
    parser.add_argument("--show", action="store_true", help="print each call and its result")
    args = parser.parse_args()
    days = (date(2027, 1, 1) - date.today()).days
    cases = [Case(c.text, c.tool, rf"\b{days}\b") if not (c.answer or c.effect) else c
             for c in CASES]  # fmt: skip
    if args.only:
        cases = [cases[i - 1] for i in args.only]
    started = time.monotonic()
    with chat_server() as (server, name):
        outcomes = asyncio.run(run(server, name, cases, args.max_tokens, args.show))
        first, tokens, bare = _empty_chat(server, name)
    n = len(outcomes)
    called = sum(o.case.tool in o.called for o in outcomes)
    right = sum(o.right for o in outcomes)
    print(f"\nTool use on {name} ({n} everyday requests, {time.monotonic() - started:.0f} s)")
    print(f"  the needed tool called: {called} of {n} ({called / n:.0%})")
    print(f"  right answer or effect: {right} of {n} ({right / n:.0%})")
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
