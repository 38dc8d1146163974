"""No turn waits for a summary (issue 46 item 4), through the assembled app: the fake model
plays llama-server run with `-c 4096` (the recorded day's server), the person writes the
day's messages (tests/fixtures/llm/day/day-messages.json) one after another, and the
summary of the oldest turns hangs until the test lets it go. Every turn is answered
meanwhile (the history trimmed, the model told what it does not see); once the summary is
stored the next turn shows it; and a 4k context compresses at most once in ten turns."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from sqlalchemy import select

from bot.sessions.models import SessionCompression
from tests.e2e.conftest import OWNER, TG
from tests.fakes.openai_server import FakeOpenAI, Lane, Text, Turn
from tests.polling import until
from tests.prompt_blocks import earlier_of

DAY = Path(__file__).parents[1] / "fixtures" / "llm" / "day" / "day-messages.json"
# The day's messages to the model (its commands left out), as the person wrote them.
MESSAGES = [m["text"] for m in json.loads(DAY.read_text()) if not m["text"].startswith("/")]


def compressing(body: dict[str, Any]) -> bool:
    return str(body["messages"][0]["content"]).startswith("You compress")


def faithful(body: dict[str, Any]) -> str:
    source = body["messages"][-1]["content"]
    fact = "The user is Marta, a nurse in Lisbon; her sister Anna lives in Porto. "
    return (fact if "Anna" in source else "") + "The rest was about work and plans."


async def compressions(tg: TG) -> list[SessionCompression]:
    async with tg.app.session_factory() as s:
        return list((await s.execute(select(SessionCompression))).scalars())


async def test_no_turn_waits_for_a_summary(
    make_tg: Callable[..., Awaitable[TG]], fake_llm: FakeOpenAI
) -> None:
    fake_llm.n_ctx = 4096
    held = asyncio.Event()

    def summary(body: dict[str, Any]) -> Turn:
        return Text(faithful(body), after=held)

    lane = Lane(compressing, after=summary)
    fake_llm.lanes.append(lane)
    tg = await make_tg()
    turns = MESSAGES * 2  # 44 turns in one session
    for i, text in enumerate(turns[:22]):
        await tg.send(OWNER, text)
        assert (await tg.reply(OWNER)).text.startswith("echo:"), i
    # The summary was asked for and hangs; the turns went on without it, trimmed.
    assert len(lane.requests) == 1
    chats = [r for r in fake_llm.requests if r.get("stream")]
    assert "[not shown]" in earlier_of(chats[-1]["messages"][1]["content"])
    assert all(r["messages"][0]["content"] != lane.requests[0]["messages"][0]["content"]
               for r in chats)  # fmt: skip

    held.set()

    async def stored() -> bool:
        return any(r.verified for r in await compressions(tg))

    await until(stored, "the summary is stored")
    for text in turns[22:]:
        await tg.send(OWNER, text)
        assert (await tg.reply(OWNER)).text.startswith("echo:")
        if "[compressed]" in earlier_of(fake_llm.requests[-1]["messages"][1]["content"]):
            break
    else:
        raise AssertionError("no turn after the summary showed it")
    assert fake_llm.refused == []


async def test_a_4k_context_compresses_at_most_once_in_ten_turns(
    make_tg: Callable[..., Awaitable[TG]], fake_llm: FakeOpenAI
) -> None:
    fake_llm.n_ctx = 4096
    lane = Lane(compressing, after=lambda body: Text(faithful(body)))
    fake_llm.lanes.append(lane)
    tg = await make_tg()
    turns = MESSAGES * 2
    for text in turns:
        await tg.send(OWNER, text)
        assert (await tg.reply(OWNER)).text.startswith("echo:")
        await until(lambda: _quiet(tg), "the summary in the background is done")
    rows = await compressions(tg)
    assert rows and all(r.verified for r in rows), [(r.verified, r.reason) for r in rows]
    assert len(rows) <= len(turns) // 10, len(rows)
    assert fake_llm.refused == []


async def _quiet(tg: TG) -> bool:
    from bot.sessions.history import COMPRESSIONS

    await tg.app.part(COMPRESSIONS).idle()
    return True


async def test_a_turn_fitted_before_a_summary_was_stored_asks_for_no_second_one(
    make_tg: Callable[..., Awaitable[TG]], fake_llm: FakeOpenAI
) -> None:
    """A turn whose history was fitted while the summary was being written found the old
    range due; by its answer the summary is stored and what is left uncovered is the few
    turns answered meanwhile: no summary of those yet (a model call for fewer than
    STEP_TURNS of the person's turns)."""
    fake_llm.n_ctx = 4096
    summary_held, answer_held = asyncio.Event(), asyncio.Event()
    summaries = Lane(compressing, after=lambda body: Text(faithful(body), after=summary_held))
    mark = "One more thing before I forget about the plans."

    def marked(body: dict[str, Any]) -> bool:
        return bool(body.get("stream")) and mark in str(body["messages"][-1]["content"])

    held_answer = Lane(marked, after=lambda body: Text("echo: noted", after=answer_held))
    fake_llm.lanes += [summaries, held_answer]
    tg = await make_tg()
    turns = iter(MESSAGES * 2)
    while not summaries.requests:
        await tg.send(OWNER, next(turns))
        assert (await tg.reply(OWNER)).text.startswith("echo:")
    for _ in range(4):  # answered meanwhile: left for a later summary
        await tg.send(OWNER, next(turns))
        assert (await tg.reply(OWNER)).text.startswith("echo:")
    assert len(summaries.requests) == 1
    await tg.send(OWNER, mark)
    await until(lambda: bool(held_answer.requests), "the marked turn asked the model")
    summary_held.set()  # its history was fitted while the summary was being written

    async def stored() -> bool:
        return any(r.verified for r in await compressions(tg))

    await until(stored, "the summary is stored")
    await _quiet(tg)
    answer_held.set()
    assert (await tg.reply(OWNER)).text == "echo: noted"
    await until(lambda: _quiet(tg), "a summary in the background is done")
    rows = await compressions(tg)
    assert len(summaries.requests) == 1 and len(rows) == 1, [
        (r.first_turn, r.last_turn) for r in rows
    ]
