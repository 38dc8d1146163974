"""How much of each prompt a real llama.cpp server must process again (issue 24).

Runs one session of N messages through the real agent (bot/agent, the real LLM client)
against llama-server with Qwen2.5-Coder-0.5B-Instruct (installed by `make test-real`, or
`python scripts/real_llm.py`), through the real tier's recording proxy (answers capped at a
few tokens: only the prompt matters here). For messages 2, 5 and 20 it prints llama-server's
own `timings` of the message's first model call: `prompt_n` (tokens processed again) and
`cache_n` (tokens reused from the slot's cache). Goal: <= 15% processed from message 2 on.

It also prints the tokens of the empty-chat prompt (system prompt + tool schemas, the first
request with a one-word message), as the chat model's tokenizer counts it (llama-server
`/apply-template` with the request's tools, then `/tokenize`), next to Sidekick's own estimate.

Usage: python bench/prefix_cache.py [--messages 20]
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.cli import options
from bench.llama import assembled, chat_server, prompt_tokens
from bot.agent.runner import Incoming
from tests.real.proxy import Exchange
from tests.real.servers import LlamaServer
from tools.tokens import estimate_tokens

USER = 4242
SHOWN = (2, 5, 20)
# Short, varied turns: what a person types into a chat.
LINES = [
    "hi", "What is 12 times 7?", "Name a fruit.", "Thanks.", "Spell cat backwards.",
    "One word for happy?", "Is it Monday?", "Say yes.", "A colour, please.", "Count to 3.",
    "What is 2 plus 2?", "Name an animal.", "Ok.", "A number under 10?", "Say no.",
    "Name a city.", "Short joke?", "Bye for now.", "Back again.", "One more word.",
]  # fmt: skip


async def session(server: LlamaServer, messages: int, name: str) -> list[Exchange]:
    firsts: list[Exchange] = []
    # Short answers: the prompt is what is measured.
    async with assembled(server, name, 8, llm_max_output_tokens=8) as (app, proxy):
        for i in range(messages):
            before = len(proxy.chats())
            started = time.monotonic()
            await app.agent.handle(
                Incoming(LINES[i % len(LINES)], telegram_user_id=USER, user_name="Ana")
            )
            x = proxy.chats()[before]
            firsts.append(x)
            t = x.timings
            print(f"  message {i + 1:>2}: prompt_n {t.get('prompt_n')!s:>5}, cache_n "
                  f"{t.get('cache_n')!s:>5}, {time.monotonic() - started:5.1f} s",
                  file=sys.stderr, flush=True)  # fmt: skip
    return firsts


def main() -> None:
    args = options(__doc__, messages=20)
    with chat_server() as (server, name):
        firsts = asyncio.run(session(server, args.messages, name))
        tokens, bare = prompt_tokens(server, firsts[0].request)
    print(f"\nPrompt reuse on llama-server ({name}, one session of {args.messages} messages)")
    print(f"{'message':>8} {'prompt tokens':>14} {'re-processed':>13} {'cached':>7} {'share':>7}")
    for n in SHOWN:
        if n > len(firsts):
            continue
        t = firsts[n - 1].timings
        total = t["prompt_n"] + t["cache_n"]
        print(f"{n:>8} {total:>14,} {t['prompt_n']:>13,} {t['cache_n']:>7,} "
              f"{t['prompt_n'] / total:>7.0%}")  # fmt: skip
    first = firsts[0].request
    estimate = estimate_tokens(json.dumps(first["messages"][0])) + estimate_tokens(
        json.dumps(first.get("tools") or [])
    )
    print("\nEmpty-chat prompt (system + tool schemas, one-word message)")
    print(f"  {name} tokenizer: {tokens:,} tokens ({tokens - bare:,} of them tool schemas, "
          f"{len(first.get('tools') or [])} tools)")  # fmt: skip
    print(f"  Sidekick's estimate (tools/tokens.py): {estimate:,} tokens")


if __name__ == "__main__":
    main()
