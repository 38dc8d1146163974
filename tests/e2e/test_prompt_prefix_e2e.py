"""Append-only prompts through the assembled app: each request to the model extends the
previous one byte for byte (the previous messages, then its answer), so a provider's
prefix cache (llama.cpp's, OpenAI's) re-reads only the new turn. A turn keeps the
[context] block it was sent with (time, recalled memories); notes on compressed or
trimmed turns sit at the cut, never in the system message."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from sqlalchemy import select

from bot.agent import prompt as history
from bot.sessions.models import SessionCompression
from db.repos import core as core_repo
from tests.e2e.conftest import OWNER, TG
from tests.fakes.openai_server import FakeOpenAI, Text, Turn, echo
from tests.prompt_blocks import context_of, earlier_of
from tools.memory.store import MEMORY


def chats(llm: FakeOpenAI) -> list[dict[str, Any]]:
    return [r for r in llm.requests if r.get("stream")]


def wire(messages: list[dict[str, Any]]) -> str:
    return json.dumps(messages, ensure_ascii=False)


def extends(first: dict[str, Any], answer: str, second: dict[str, Any]) -> bool:
    """Whether `second` starts with exactly `first`'s messages and its answer, and offers
    the same tools."""
    before = [*first["messages"], {"role": "assistant", "content": answer}]
    same = wire(second["messages"][: len(before)]) == wire(before)
    return same and second.get("tools") == first.get("tools")


async def test_the_next_request_extends_the_previous_one_with_its_recalled_memories(
    tg: TG,
) -> None:
    async with tg.app.session_factory() as s, s.begin():
        user = await core_repo.get_or_create_user(s, OWNER, "Tester", tg.app.deps.clock())
    await tg.app.part(MEMORY).store(user_id=user.id, layer="long", content="Lives in Porto")
    for text, answer in [
        ("what should I cook tonight?", "Bacalhau."),
        ("and for dessert?", "Pastéis de nata."),
        ("thanks!", "Enjoy."),
    ]:
        tg.llm.add(Text(answer))
        await tg.send(OWNER, text)
        assert (await tg.reply(OWNER)).text == answer
    first, second, third = chats(tg.llm)[-3:]
    assert "Lives in Porto" in context_of(first["messages"])  # recalled into the block
    assert extends(first, "Bacalhau.", second)
    assert extends(second, "Pastéis de nata.", third)


def earlier(request: dict[str, Any]) -> str:
    return earlier_of(request["messages"][1]["content"])


def summariser(body: dict[str, Any]) -> Turn:
    """Summary requests (the only non-streamed calls here) get a faithful summary; the chat
    gets an echo."""
    if body.get("stream"):
        return echo(body)
    return Text("The user made small talk about the weather, turn after turn.")


async def test_after_a_compression_requests_extend_each_other_and_the_system_stays(
    make_tg: Callable[..., Awaitable[TG]], fake_llm: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_llm.responder = summariser
    monkeypatch.setattr(history, "HISTORY_TOKEN_BUDGET", 400)
    tg = await make_tg()
    answers = []
    # Long enough for a compression (at least ten of the person's turns, written after an
    # answer) and the turns after it, which fit beside the summary until the next overflow.
    for i in range(1, 31):
        text = f"Message {i}: small talk about the weather, nothing else."
        await tg.send(OWNER, text)
        answers.append((await tg.reply(OWNER)).text)
    async with tg.app.session_factory() as s:
        rows = list((await s.execute(select(SessionCompression))).scalars())
    assert rows and all(r.verified for r in rows)
    sent = chats(fake_llm)
    # The system message (and with it the tool schemas' place) never changes...
    assert len({wire(r["messages"][:1]) for r in sent}) == 1
    # ...the summary stands in at the cut, in front of the first turn shown...
    assert any(earlier(r).startswith("[compressed]") for r in sent)
    # ...and between two compressions each request extends the one before it.
    pairs = [
        (a, answer, b)
        for a, answer, b in zip(sent, answers, sent[1:], strict=False)
        if earlier(a).startswith("[compressed]") and a["messages"][1] == b["messages"][1]
    ]
    assert pairs
    assert all(extends(a, answer, b) for a, answer, b in pairs)
