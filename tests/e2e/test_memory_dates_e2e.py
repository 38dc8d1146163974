"""A time the question names, resolved against when it is asked, finds what was said then:
through the real Dispatcher, the model's recall call and the memory tool's result."""

from __future__ import annotations

import calendar
import json
from datetime import timedelta

from sqlalchemy import update

from tests.e2e.conftest import OWNER, TG
from tests.e2e.test_memory_e2e import store_via_model
from tests.fakes.openai_server import Calls, Text
from tools.memory.models import Memory


async def recalled(tg: TG, query: str) -> list[str]:
    """The memories the recall tool returned for `query`, best first."""
    tg.llm.add(Calls([("memory", {"action": "recall", "query": query})]), Text("done"))
    await tg.send(OWNER, query)
    assert (await tg.reply(OWNER)).text == "done"
    last = tg.llm.requests[-1]["messages"]
    result = json.loads([m for m in last if m["role"] == "tool"][-1]["content"])
    return [m["content"] for m in result["memories"]]


async def test_a_month_named_without_a_year_finds_what_was_said_then(tg: TG) -> None:
    # Of two categories: two facts of one category in one frame (text.frame) put the newer
    # first whatever the date.
    await store_via_model(tg, OWNER, "Cooked a green curry with Ana", "event")
    await store_via_model(tg, OWNER, "Cooked a red curry with Ana", "fact")
    # The first was said about two months ago; the second now (newer, so first without a
    # date in the question).
    then = tg.app.deps.clock() - timedelta(days=61)
    async with tg.app.session_factory() as s, s.begin():
        await s.execute(
            update(Memory).where(Memory.id == 1).values(created_at=then, updated_at=then)
        )
    without = await recalled(tg, "what did I cook with Ana?")
    assert without[0] == "Cooked a red curry with Ana"
    month = calendar.month_name[then.month]
    got = await recalled(tg, f"what did I cook with Ana in {month}?")
    assert got[0] == "Cooked a green curry with Ana"
    got = await recalled(tg, "what did I cook with Ana two months ago?")
    assert got[0] == "Cooked a green curry with Ana"
