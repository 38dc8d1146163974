"""Memory through the real Dispatcher: a fact survives /newsession, /memory lists, searches
and forgets (with a confirm step), and nobody can touch another user's memories."""

from __future__ import annotations

import json

from sqlalchemy import select

from bot.agent.prompt import context_of
from db.models import Memory
from tests.e2e.conftest import OWNER, TG
from tests.fakes.openai_server import Calls, Text

OTHER = 2001


async def store_via_model(tg: TG, user: int, content: str, category: str = "fact") -> None:
    args = {"action": "store", "layer": "long", "content": content, "category": category}
    tg.llm.add(Calls([("memory", args)]), Text("noted"))
    await tg.send(user, f"remember: {content}")
    assert (await tg.reply(user)).text == "noted"


async def memory_contents(tg: TG) -> list[str]:
    async with tg.app.session_factory() as s:
        return list((await s.execute(select(Memory.content).order_by(Memory.id))).scalars())


async def test_fact_is_recalled_after_newsession(tg: TG) -> None:
    await store_via_model(tg, OWNER, "Is allergic to penicillin")
    tg.llm.add(Text("The user shared a medical fact."))
    await tg.send(OWNER, "/newsession")
    assert "new session" in (await tg.reply(OWNER)).text.lower()

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
    confirm = await tg.reply(OWNER)
    assert confirm.text.startswith("Forget this?") and "Lives in Porto" in confirm.text
    assert await memory_contents(tg) == ["Lives in Porto", "Likes green tea"]  # not yet
    await tg.press(OWNER, "mem:y:1", message_id=confirm.message_id)
    assert (await tg.reply(OWNER)).text == "Forgot #1."
    assert await memory_contents(tg) == ["Likes green tea"]

    await tg.send(OWNER, "/memory mid")
    assert (await tg.reply(OWNER)).text == "No mid memories."


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
    await tg.press(OWNER, "mem:y:2", message_id=1)
    await tg.idle()
    assert await memory_contents(tg) == ["Plays chess on Sundays", "Owns a sailing boat"]

    for bad in ["/memory forget abc", "/memory search", "/memory forever"]:
        await tg.send(OWNER, bad)
        assert (await tg.reply(OWNER)).text.startswith("Usage: /memory")
    await tg.send(OWNER, "/memory forget #1")
    assert (await tg.reply(OWNER)).text == "Forgot #1."
    assert await memory_contents(tg) == ["Owns a sailing boat"]
