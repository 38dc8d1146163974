"""Sidekick against a real llama.cpp server (see conftest.py): chat, streaming, usage, a
tool call in llama.cpp's own stream format, EMBEDDINGS=<model> recall, and prefix reuse.

CPU inference takes tens of seconds a message here: waits are long, answers short."""

from __future__ import annotations

import json
import re

import pytest
from sqlalchemy import select

from db.repos.core import get_or_create_user
from tests.e2e.conftest import OWNER, TG
from tests.real.proxy import Exchange, RecordingProxy
from tools.memory.models import Memory
from tools.memory.store import MEMORY

# These prove llama.cpp's own paths, unheld: its streamed answer and usage, its tool-call
# stream (the proxy forces one; with a held reply's schema as well llama-server refuses the
# request: "Failed to initialize samplers"), embeddings, the prompt prefix it reuses. The
# default, held, is proven by tests/real/test_small_models.py.
pytestmark = [
    pytest.mark.timeout(1200),
    pytest.mark.settings(llm_constrained_calls="off"),
]

WAIT = 900.0  # one message: a whole uncached prompt on a loaded 2-core machine
# From the 2nd message of a session on, at most 15% of the prompt may be processed again
# (issue 24): the system prompt and tool schemas must be a byte-identical prefix.
MIN_REUSE = 0.85


def streamed_text(x: Exchange) -> str:
    return "".join(
        (c.get("delta") or {}).get("content") or ""
        for e in x.events
        for c in e.get("choices") or []
    )


def plain(text: str) -> str:
    """Text without Markdown marks and spacing, to compare the model's words with what
    the Telegram adapter rendered from them."""
    text = re.sub(r"```[\w-]*", "", text)  # a fence and its language: a code block in Telegram
    return re.sub(r"[\s*_`#>\-]+", "", text)


async def ask(bot: TG, text: str) -> str:
    await bot.send(OWNER, text)
    reply = await bot.reply(OWNER, timeout=WAIT)
    await bot.idle(timeout=WAIT)
    # On a loaded machine a wait line ("Still waiting for the model ...") comes first: the
    # answer is the last message.
    if later := bot.unread(OWNER):
        *_, reply = await bot.replies(OWNER, len(later), timeout=WAIT)
    return reply.text


async def test_chat_streams_and_records_the_servers_usage(bot: TG, proxy: RecordingProxy) -> None:
    # Streaming and usage do not depend on the tools: offered them, the sampled 0.5B model
    # writes a call out (never shown, so no drafts) for about half of these questions.
    proxy.without_tools = True
    proxy.greedy = True
    asks = ["Count from 1 to 10 in digits, separated by spaces. Nothing else.",
            "Name three colours, separated by commas.", "Say hello in French."]  # fmt: skip
    for question in asks:
        before = len(bot.server.drafts)
        text = await ask(bot, question)
        drafts = [c.params.get("text") or "" for c in bot.server.drafts[before:]]
        if len(drafts) >= 2:
            break
    # The answer arrived in many chunks, and the user watched it grow (drafts) before the
    # final message; the final message holds the model's streamed words (and maybe a note).
    said = [(streamed_text(c)[:200], c.finish_reason()) for c in proxy.chats()]
    assert len(drafts) >= 2, (drafts, said)
    xs = proxy.chats()
    x = xs[-1]
    assert all(c.status == 200 and c.request["stream"] is True for c in xs)
    words = streamed_text(x)
    assert len([e for e in x.events if e.get("choices")]) > 3, x.raw[:500]
    assert plain(words) and plain(words) in plain(text), (text, words)
    # llama.cpp's usage chunk (choices: [], usage, timings) is what Sidekick recorded: /usage
    # sums every call of the day.
    usages = [c.answer["usage"] for c in xs]
    prompt = sum(u["prompt_tokens"] for u in usages)
    cached = sum((u.get("prompt_tokens_details") or {}).get("cached_tokens", 0) for u in usages)
    out = sum(u["completion_tokens"] for u in usages)
    calls = f"{len(xs)} call{'s' if len(xs) != 1 else ''}"
    expected = f"{calls} · {prompt:,} tokens in" + (f" ({cached:,} cached)" if cached else "")
    await bot.send(OWNER, "/usage")
    chart, answer = await bot.replies(OWNER, 2, timeout=WAIT)  # a chart above the text
    assert chart.method == "sendPhoto"
    report = answer.text
    assert expected + f" · {out:,} out" in report, (usages, report)
    assert "estimated" not in report
    assert len(proxy.chats()) == len(xs)  # /usage was answered locally


async def test_a_forced_tool_call_in_llama_cpps_stream_runs_the_tool(
    bot: TG, proxy: RecordingProxy
) -> None:
    proxy.force_tool("memory")
    text = await ask(bot, "Remember this long-term fact: my cat is called Tom.")
    first, *rest = proxy.chats()
    assert "forced:memory" in first.changed
    # llama.cpp's own tool-call stream: an id and the name once, the arguments in pieces.
    deltas = first.tool_calls()
    assert first.finish_reason() == "tool_calls", first.raw[-800:]
    assert deltas[0]["function"]["name"] == "memory" and deltas[0]["id"]
    assert len(deltas) > 1 and all("name" not in d.get("function", {}) for d in deltas[1:])
    call_id = deltas[0]["id"]
    # The bot ran the tool and sent the model its result for that call.
    assert rest, "no second model call after the tool"
    sent = rest[0].request["messages"]
    (asked,) = [m for m in sent if m["role"] == "assistant" and m.get("tool_calls")]
    assert [(c["id"], c["function"]["name"]) for c in asked["tool_calls"]] == [(call_id, "memory")]
    # ... with the arguments Sidekick put together from the pieces, byte for byte.
    pieces = "".join(d.get("function", {}).get("arguments") or "" for d in deltas)
    assert asked["tool_calls"][0]["function"]["arguments"] == pieces
    args = json.loads(pieces)
    (result,) = [m for m in sent if m["role"] == "tool"]
    assert result["tool_call_id"] == call_id
    assert "unknown tool" not in result["content"]
    assert text.strip()
    if args.get("action") == "store" and args.get("content"):
        async with bot.app.session_factory() as s:
            stored = list((await s.execute(select(Memory.content))).scalars())
        assert stored, f"asked to store {args}, stored nothing; the tool said {result['content']!r}"


async def test_openai_embeddings_recall_through_llama_server(
    bot: TG, proxy: RecordingProxy
) -> None:
    memory = bot.app.part(MEMORY)
    async with bot.app.session_factory() as s, s.begin():  # the user the bot will find
        user = (await get_or_create_user(s, OWNER, "Ana", bot.app.deps.clock())).id
    facts = [
        "Is allergic to penicillin",
        "Has a cat called Tom",
        "Favourite colour is green",
        "Lives in Lisbon",
        "Plays the cello on Sundays",
        "Works as a carpenter",
    ]
    for fact in facts:
        await memory.store(user_id=user, layer="mid", content=fact)
    stored = proxy.embeddings()
    assert stored and all(x.status == 200 for x in stored)
    embedded = [i for x in stored for i in ([x.request["input"]] if isinstance(
        x.request["input"], str) else x.request["input"])]  # fmt: skip
    assert set(facts) <= set(embedded)
    # No word in common with the fact: only the vectors can find it.
    question = "Which antibiotics should I avoid?"
    hits = await memory.recall(user_id=user, query=question, layers=["mid"], limit=3)
    assert hits and hits[0].content == facts[0], [h.content for h in hits]

    await ask(bot, question + " Answer in one short sentence.")
    assert any(question in json.dumps(x.request) for x in proxy.embeddings()[len(stored) :])
    (x,) = proxy.chats()
    assert facts[0] in json.dumps(x.request["messages"])  # auto-recall put it in the prompt


async def test_the_second_message_reuses_the_prompt_prefix(bot: TG, proxy: RecordingProxy) -> None:
    await ask(bot, "Say hi in two words.")
    await ask(bot, "Now say bye in two words.")
    _, second = proxy.chats()
    t = second.timings
    assert t["cache_n"] + t["prompt_n"] == second.answer["usage"]["prompt_tokens"]
    assert second.reuse() >= MIN_REUSE, (
        f"llama-server re-processed {t['prompt_n']} of {t['cache_n'] + t['prompt_n']} prompt "
        f"tokens on the 2nd message (reused {second.reuse():.0%}, want >= {MIN_REUSE:.0%}): "
        "the prompt does not start with a stable prefix"
    )
