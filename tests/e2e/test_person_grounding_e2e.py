"""A memory about the person comes from the person (issue 46 item 3), through the assembled
app, with what a real 1.5B model wrote over a day (tests/fixtures/llm/day/): it said something
of the person in its own answer, then stored it as their fact, archived it as the session's
memory, and summarised a reminder that no call had set. Each is refused, and the model is told
why; what the person said is kept."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from sqlalchemy import select

from tests.e2e.conftest import OWNER, TG
from tests.fakes.openai_server import FakeOpenAI, Lane, Text, Turn, echo
from tests.polling import polled
from tools.memory.models import Memory

DAY = json.loads(
    (Path(__file__).parents[1] / "fixtures" / "llm" / "day" / "excerpts.json").read_text()
)
INVENTED = "Your sister is a 20-year-old artist living in Paris, France."
# Recorded (29): after the model's own answer above, asked "What did I tell you about my sister?"
STORE = (
    '{"name": "memory", "arguments": {"action": "store", "layer": "mid", '
    '"content": "My sister is a 20-year-old artist living in Paris, France."}}'
)


async def memories(tg: TG) -> list[str]:
    async with tg.app.session_factory() as s:
        return list((await s.execute(select(Memory.content).order_by(Memory.id))).scalars())


async def test_a_fact_only_the_model_said_is_not_stored_and_the_model_hears_why(
    tg: TG,
) -> None:
    tg.llm.add(Text(INVENTED))
    await tg.send(OWNER, "Please remember that my sister Anna lives in Porto.")
    await tg.reply(OWNER)
    tg.llm.add(Text(STORE), Text("I could not store that."))
    await tg.send(OWNER, "What did I tell you about my sister?")
    assert (await tg.reply(OWNER)).text == "I could not store that."
    await tg.idle()
    assert await memories(tg) == []
    results = [m["content"] for m in tg.llm.requests[-1]["messages"] if m["role"] == "tool"]
    assert results[-1].startswith("Error: Not stored: the user did not say this"), results
    assert "20" in results[-1] and "Paris" in results[-1]

    # What the person said is stored.
    store = '{"name": "memory", "arguments": {"action": "store", "layer": "long", '
    store += '"content": "Sister Anna lives in Porto", "category": "relationship"}}'
    tg.llm.add(Text(store), Text("Noted."))
    await tg.send(OWNER, "Please store that my sister Anna lives in Porto.")
    assert (await tg.reply(OWNER)).text == "Noted."
    assert await memories(tg) == ["Sister Anna lives in Porto"]


async def test_an_archive_of_what_only_the_model_said_is_not_kept(
    make_tg: Callable[..., Awaitable[TG]], fake_llm: FakeOpenAI
) -> None:
    recorded = DAY["summaries"]["38"]["content"]  # "FACTS: … Marta is 20 years old …"

    def archive(body: dict[str, Any]) -> Turn:
        return Text(recorded)

    fake_llm.lanes.append(
        Lane(lambda b: str(b["messages"][0]["content"]).startswith("You write the memory"),
             after=archive)
    )  # fmt: skip
    tg = await make_tg()
    tg.llm.add(Text(INVENTED), Text("85 days."))
    await tg.send(OWNER, "Hi! I'm Marta. My sister Anna lives in Porto.")
    await tg.reply(OWNER)
    await tg.send(OWNER, "How many days are there from 2026-12-06 to 2027-03-01?")
    await tg.reply(OWNER)
    await tg.send(OWNER, "/newsession")
    await tg.reply(OWNER)

    async def archived() -> bool:
        return any(m.startswith("2026") or "wrote" in m for m in await memories(tg))

    await polled(archived, 30.0)  # the asserts below say what was kept
    kept = await memories(tg)
    assert kept and not any("20 years" in m for m in kept), kept
    assert any("Anna lives in Porto" in m for m in kept), kept


async def test_a_summary_claiming_a_reminder_no_call_set_is_rejected(
    make_tg: Callable[..., Awaitable[TG]], fake_llm: FakeOpenAI
) -> None:
    from bot.sessions.models import SessionCompression

    recorded = DAY["summaries"]["22"]["content"]  # "The user's reminder … is still active."
    fake_llm.n_ctx = 4096
    lane = Lane(
        lambda b: str(b["messages"][0]["content"]).startswith("You compress"),
        after=lambda body: Text(recorded),
    )
    fake_llm.lanes.append(lane)
    fake_llm.responder = echo
    tg = await make_tg()
    messages = [m["message"] for m in DAY["replies"].values()] * 3
    rows: list[SessionCompression] = []
    for text in messages:
        await tg.send(OWNER, text)
        await tg.reply(OWNER)
        async with tg.app.session_factory() as s:
            rows = list((await s.execute(select(SessionCompression))).scalars())
        if rows:
            break
    assert rows and not rows[0].verified, [(r.verified, r.reason) for r in rows]
    assert "a reminder no call set" in (rows[0].reason or "")
    # The model was told what was wrong when asked again.
    assert "a reminder no call set" in lane.requests[-1]["messages"][-1]["content"]
