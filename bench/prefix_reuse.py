"""How many prompt tokens each message makes the model process again, counted offline.

bench/prefix_cache.py reads this from a real llama-server's own timings; this one needs no
model server: the assembled app (bot/app.py: agent, recall, history, compression) talks to
the loopback fake OpenAI server, every chat request is rendered the way a ChatML template
renders it (tools in the system turn, then each message), and the tokens after the prefix
it shares with the previous request plus that request's answer (what a server's slot cache
holds) are counted with Sidekick's tokenizer (tools/tokens.py). Goal (issue 35): per
message, no more than the new user turn + the last answer + 20 tokens.

Usage: python bench/prefix_reuse.py [--messages 12] [--history-budget 0]
(`--history-budget N` lowers HISTORY_TOKEN_BUDGET so that compression and trimming happen.)
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.cli import options
from bot.agent import prompt as history
from bot.agent.runner import Incoming
from bot.app import build_app
from db.repos import core as core_repo
from tests.conftest import make_settings
from tests.fakes.openai_server import FakeOpenAI, Text, Turn
from tools.memory.store import MEMORY
from tools.tokens import count_text

ANSWER = "Sure: here is a short answer with a few concrete points, kept brief as asked."


def render(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> str:
    """A ChatML rendering (Qwen's template, simplified): what the server tokenizes."""
    out = []
    for i, m in enumerate(messages):
        content = m.get("content") or ""
        if not isinstance(content, str):
            content = json.dumps(content, ensure_ascii=False)
        if i == 0 and tools:
            content += "\n\n# Tools\n" + "\n".join(json.dumps(t, ensure_ascii=False) for t in tools)
        if m.get("tool_calls"):
            content += json.dumps(m["tool_calls"], ensure_ascii=False)
        out.append(f"<|im_start|>{m['role']}\n{content}<|im_end|>\n")
    return "".join(out)


def common(a: str, b: str) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def reply(body: dict[str, Any]) -> Turn:
    if body.get("stream"):
        return Text(ANSWER)
    return Text("The user asked a series of short questions about their day and plans.")


async def main(messages: int, budget: int) -> None:
    logging.disable(logging.WARNING)
    if budget:
        history.HISTORY_TOKEN_BUDGET = budget
    llm = await FakeOpenAI(responder=reply).start()
    with tempfile.TemporaryDirectory() as tmp:
        app = await build_app(make_settings(Path(tmp), llm))
        try:
            async with app.session_factory() as s, s.begin():
                user = await core_repo.get_or_create_user(s, 7, "Ann", app.deps.clock())
            # a recalled memory in every context block
            await app.part(MEMORY).store(user_id=user.id, layer="long", content="Lives in Porto")
            for i in range(1, messages + 1):
                text = f"Question {i}: what should I do about item {i} on my list today?"
                await app.agent.handle(Incoming(text, telegram_user_id=7, user_name="Ann"))
        finally:
            await app.close()
            await llm.stop()
    chats = [r for r in llm.requests if r.get("stream")]
    answer = f"<|im_start|>assistant\n{ANSWER}<|im_end|>\n"
    over, rows = [], []
    for prev, cur in itertools.pairwise(chats):
        cached = render(prev["messages"], prev.get("tools")) + answer
        now = render(cur["messages"], cur.get("tools"))
        again = count_text(now[common(cached, now) :])
        turn = count_text(render(cur["messages"][-1:], None))
        allowed = turn + count_text(answer) + 20
        rows.append(again)
        over.append(again - allowed)
    print(f"{len(chats)} requests; tokens processed again per message (from the 2nd):")
    print(f"  p50 {statistics.median(rows):.0f}, max {max(rows)}; per message: {rows}")
    print(f"  over the goal (new turn + last answer + 20): {sum(o > 0 for o in over)} messages")
    first = render(chats[0]["messages"], chats[0].get("tools"))
    print(f"  empty-chat prompt: {count_text(first)} tokens")


if __name__ == "__main__":
    a = options(__doc__, messages=12, history_budget=0)
    asyncio.run(main(a.messages, a.history_budget))
