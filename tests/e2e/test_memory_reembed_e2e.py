"""Upgrading to another embedder: the bot re-embeds every memory in the background once it
has started, answering meanwhile, keeps every memory, says how far it got in
`sidekick status`, and recall uses the new vectors once it is done."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

import pytest
from sqlalchemy import func, select, text

from bot.ops.status import print_status
from bot.telegram.delivery import TelegramDelivery
from db.engine import create_engine, session_factory
from tests.e2e.conftest import OWNER, TG, WAIT_S
from tests.e2e.test_memory_e2e import store_via_model
from tests.fakes.openai_server import Calls, Text
from tools.memory import repo
from tools.memory.models import Memory
from tools.memory.reembed import PROGRESS

FORMER = "wordllama:l2_supercat:64"  # an index made by an earlier embedder


async def meta(tg: TG) -> dict[str, str]:
    async with tg.app.session_factory() as s:
        return await repo.meta(s)


async def test_upgrade_reembeds_and_keeps_every_memory(
    tg: TG, capsys: pytest.CaptureFixture[str]
) -> None:
    facts = ["Lives in Porto", "Plays the violin on Sundays", "Is allergic to penicillin"]
    for fact in facts:
        await store_via_model(tg, OWNER, fact)
    current = (await meta(tg))["model"]
    assert current != FORMER
    await tg.stop()
    engine = create_engine(tg.settings.db_url)
    try:
        async with session_factory(engine).begin() as s:
            await repo.set_meta(s, {"model": FORMER})
            await s.execute(text("DELETE FROM memory_vec"))  # the old vectors are of no use
    finally:
        await engine.dispose()

    await tg.start()
    await tg.app.start_features(TelegramDelivery(tg.runtime.bot))  # as `sidekick run` does
    # It answers meanwhile (recall by words until the vectors are in).
    await tg.send(OWNER, "hello again")
    assert (await tg.reply(OWNER)).text == "echo: hello again"

    async def finished() -> bool:
        found = await meta(tg)
        return found.get("model") == current and not found.get(PROGRESS)

    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT_S
    while not await finished():
        assert loop.time() < deadline, f"re-embedding did not finish: {await meta(tg)}"
        await asyncio.sleep(0.05)
    async with tg.app.session_factory() as s:
        assert await repo.count_vectors(s) == 3
        kept = (await s.execute(select(Memory.content).order_by(Memory.id))).scalars().all()
        assert (await s.execute(select(func.count(Memory.id)))).scalar_one() == 3
    assert list(kept) == facts

    await print_status(tg.app.settings, datetime.now(UTC))
    assert f"memory:      index built with {current}" in capsys.readouterr().out

    # Recall finds by meaning again: no word of the query is in the memory.
    tg.llm.add(Calls([("memory", {"action": "recall", "query": "musical instrument hobby"})]),
               Text("The violin."))  # fmt: skip
    await tg.send(OWNER, "what do I play?")
    assert (await tg.reply(OWNER)).text == "The violin."
    result = [m for m in tg.llm.requests[-1]["messages"] if m["role"] == "tool"][-1]["content"]
    assert "Plays the violin on Sundays" in [m["content"] for m in json.loads(result)["memories"]]


async def test_status_shows_a_reembedding_under_way(
    tg: TG, capsys: pytest.CaptureFixture[str]
) -> None:
    await store_via_model(tg, OWNER, "Lives in Porto")
    async with tg.app.session_factory.begin() as s:
        await repo.set_meta(s, {PROGRESS: "1/4 minilm:all-MiniLM-L6-v2:384"})
    await print_status(tg.app.settings, datetime.now(UTC))
    out = capsys.readouterr().out
    assert "memory:      re-embedding 1/4 minilm:all-MiniLM-L6-v2:384" in out
