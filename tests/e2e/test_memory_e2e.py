"""Memory through the real Dispatcher: a fact survives /newsession, /memory lists, searches
and forgets (with a confirm step), nobody can touch another user's memories, and the
hourly sweep the app schedules deletes expired ones."""

from __future__ import annotations

import json
from datetime import timedelta

from sqlalchemy import select, update

from bot.sessions.background import ARCHIVE
from bot.telegram.delivery import TelegramDelivery
from tests.e2e.conftest import OWNER, TG
from tests.fakes.openai_server import Calls, Text
from tests.fakes.telegram_server import Sent
from tests.prompt_blocks import context_of
from tools.memory.models import Memory

OTHER = 2001


async def store_via_model(tg: TG, user: int, content: str, category: str = "fact") -> None:
    args = {"action": "store", "layer": "long", "content": content, "category": category}
    tg.llm.add(Calls([("memory", args)]), Text("noted"))
    await tg.send(user, f"remember: {content}")
    assert (await tg.reply(user)).text == "noted"


async def memory_contents(tg: TG) -> list[str]:
    async with tg.app.session_factory() as s:
        return list((await s.execute(select(Memory.content).order_by(Memory.id))).scalars())


async def shown(tg: TG, message_id: int) -> Sent:
    """The message as it is now (a button press edits it in place)."""
    await tg.idle()
    return next(m for m in tg.server.sent_to(OWNER) if m.message_id == message_id)


async def test_fact_is_recalled_after_newsession(tg: TG) -> None:
    await store_via_model(tg, OWNER, "Is allergic to penicillin")
    tg.llm.add(Text("The user shared a medical fact."))
    await tg.send(OWNER, "/newsession")
    assert "new session" in (await tg.reply(OWNER)).text.lower()
    # The old session's summary is written in the background: it takes its queued answer
    # before the next message's model call can.
    await tg.app.part(ARCHIVE).idle()

    tg.llm.add(
        Calls([("memory", {"action": "recall", "query": "medicine allergies"})]),
        Text("You are allergic to penicillin."),
    )
    await tg.send(OWNER, "which antibiotics should I avoid?")
    assert (await tg.reply(OWNER)).text == "You are allergic to penicillin."
    last = tg.llm.requests[-1]["messages"]
    # Auto-recall put it in the context block, and the recall tool found it too.
    assert "Is allergic to penicillin" in context_of(last)
    result = json.loads([m for m in last if m["role"] == "tool"][-1]["content"])
    assert result["memories"][0]["content"] == "Is allergic to penicillin"
    # History was reset: the old conversation is not in the request.
    assert not any("remember:" in str(m.get("content")) for m in last[1:])


async def test_memory_list_forget_with_confirm(tg: TG) -> None:
    await store_via_model(tg, OWNER, "Lives in Porto")
    await store_via_model(tg, OWNER, "Likes green tea", "preference")
    await tg.send(OWNER, "/memory")
    listing = await tg.reply(OWNER)
    assert "long memories, page 1/1 (2 in all)" in listing.text
    assert "Lives in Porto" in listing.text and "from " in listing.text
    assert listing.reply_markup is not None
    rows = listing.reply_markup["inline_keyboard"]
    forget_porto = next(b for r in rows for b in r if b["text"] == "🗑 Forget #1")
    await tg.press(OWNER, forget_porto["callback_data"], message_id=listing.message_id)
    confirm = await shown(tg, listing.message_id)
    assert confirm.text.startswith("Forget this?") and "Lives in Porto" in confirm.text
    assert await memory_contents(tg) == ["Lives in Porto", "Likes green tea"]  # not yet
    await tg.press(OWNER, "memory:y:1", message_id=confirm.message_id)
    assert (await shown(tg, confirm.message_id)).text == "Forgot #1."
    assert await memory_contents(tg) == ["Likes green tea"]

    await tg.send(OWNER, "/memory mid")
    assert (await tg.reply(OWNER)).text == "No mid memories."

    # The layer buttons turn the list into another layer's, in place.
    await tg.send(OWNER, "/memory")
    listing = await tg.reply(OWNER)
    await tg.press(OWNER, "memory:page:mid:0", message_id=listing.message_id)
    assert (await shown(tg, listing.message_id)).text == "No mid memories."


async def test_search_forget_and_bad_input(tg: TG) -> None:
    await store_via_model(tg, OWNER, "Plays chess on Sundays", "preference")
    await store_via_model(tg, OTHER, "Owns a sailing boat")
    await tg.send(OWNER, "/memory search board games")
    found = (await tg.reply(OWNER)).text
    assert found.startswith("#1 [long · preference") and "Plays chess" in found
    assert "sailing" not in found

    # Another user's id: neither the command nor a forged button can delete it.
    await tg.send(OWNER, "/memory forget 2")
    assert (await tg.reply(OWNER)).text == "There is no memory #2."
    await tg.press(OWNER, "memory:y:2", message_id=1)
    await tg.idle()
    assert await memory_contents(tg) == ["Plays chess on Sundays", "Owns a sailing boat"]

    for bad in ["/memory forget abc", "/memory search", "/memory forever"]:
        await tg.send(OWNER, bad)
        assert (await tg.reply(OWNER)).text.startswith("Usage: /memory")
    await tg.send(OWNER, "/memory forget #1")
    assert (await tg.reply(OWNER)).text == "Forgot #1."
    assert await memory_contents(tg) == ["Owns a sailing boat"]


async def test_the_scheduled_sweep_deletes_expired_memories(tg: TG) -> None:
    await store_via_model(tg, OWNER, "Dentist on Friday")
    await store_via_model(tg, OWNER, "Lives in Porto")
    async with tg.app.session_factory() as s, s.begin():
        past = tg.app.deps.clock() - timedelta(minutes=1)
        await s.execute(update(Memory).where(Memory.id == 1).values(expires_at=past))
    jobs = await tg.app.start_features(TelegramDelivery(tg.runtime.outbox))  # as `run` does
    [sweep] = [run for job_id, *_, run in jobs if job_id == "memory-sweep"]
    assert await sweep() == 1
    assert await memory_contents(tg) == ["Lives in Porto"]
    await tg.send(OWNER, "/memory")
    assert "Dentist" not in (await tg.reply(OWNER)).text
