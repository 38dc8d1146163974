"""What the tool schemas cost a small local model: the tokens the five core tools (search,
code, memory, schedule, web_fetch) add to every prompt, counted by the model server's own
tokenizer with its own chat template (llama-server's /apply-template and /tokenize, the real
tier's Qwen2.5 model; Qwen's template prints each tool as JSON after a fixed preamble).
Target: at most 1,000 tokens in all (1,971 before; a 4k context kept half for them).

The tools are those the assembled app offers in a new chat's first request (search set up),
taken from a local fake model; the real server only counts. Without the real tier installed
(`python scripts/real_llm.py`) it says so and stops.

Usage: python bench/tool_schemas.py
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.llama import chat_server
from bot.agent.runner import Incoming
from bot.app import build_app
from tests.conftest import make_settings
from tests.fakes.openai_server import FakeOpenAI
from tests.real.servers import LlamaServer, manifest

CORE = ("search", "code", "memory", "schedule", "web_fetch")
TARGET = 1000


async def offered() -> list[dict[str, Any]]:
    """The tools of a new chat's first model call."""
    fake = await FakeOpenAI().start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            settings = make_settings(Path(tmp), fake, searxng_url="http://127.0.0.1:9")
            app = await build_app(settings)
            try:
                await app.agent.handle(Incoming("hi", telegram_user_id=1, user_name="A"))
            finally:
                await app.close()
    finally:
        await fake.stop()
    tools: list[dict[str, Any]] = fake.requests[0]["tools"]
    return tools


def tokens(server: LlamaServer, tools: list[dict[str, Any]]) -> int:
    """The tokens `tools` add to a prompt (preamble included) on the server's template."""

    def count(body: dict[str, Any]) -> int:
        prompt = server.post("/apply-template", body)["prompt"]
        return len(server.post("/tokenize", {"content": prompt})["tokens"])

    messages = [{"role": "system", "content": "You help."}, {"role": "user", "content": "hi"}]
    return count({"messages": messages, "tools": tools}) - count({"messages": messages})


def main() -> None:
    if manifest() is None:
        print("tool schemas: skipped, the real tier is not installed (python scripts/real_llm.py)")
        return
    tools = asyncio.run(offered())
    core = [t for t in tools if t["function"]["name"] in CORE]
    with chat_server() as (server, name):
        total = tokens(server, core)
        each = {t["function"]["name"]: total - tokens(server, [u for u in core if u is not t])
                for t in core}  # fmt: skip
        everything = tokens(server, tools)
    print(f"\nTool schemas on {name}'s template and tokenizer")
    for tool, n in each.items():
        print(f"  {tool:<10} {n:5,} tokens")
    verdict = "met" if total <= TARGET else "NOT met"
    print(f"  the {len(core)} core tools: {total:,} tokens (target <= {TARGET:,}: {verdict})")
    print(f"  all {len(tools)} tools a new chat offers: {everything:,} tokens")


if __name__ == "__main__":
    main()
