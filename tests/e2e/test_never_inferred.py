"""A destructive action runs only when the call names it (issue 46 item 6): the 1.5B model,
asked "What am I allergic to?", wrote a memory call with `content` and `memory_id` and no
`action`; it was read as forget and the allergy was deleted."""

from __future__ import annotations

from sqlalchemy import select

from tests.e2e.conftest import OWNER, TG
from tests.fakes.openai_server import Text
from tools.memory.models import Memory


async def test_an_id_without_an_action_deletes_nothing(tg: TG) -> None:
    store = '{"name": "memory", "arguments": {"action": "store", "layer": "long", '
    store += '"content": "Allergic to peanuts", "category": "fact"}}'
    tg.llm.add(Text(store), Text("Noted."))
    await tg.send(OWNER, "Remember that I'm allergic to peanuts.")
    assert (await tg.reply(OWNER)).text == "Noted."
    async with tg.app.session_factory() as s:
        (mid,) = (await s.execute(select(Memory.id))).scalars()

    unclear = '{"name": "memory", "arguments": {"content": "What am I allergic to?", '
    unclear += f'"memory_id": {mid}}}}}'
    tg.llm.add(Text(unclear), Text("You are allergic to peanuts."))
    await tg.send(OWNER, "What am I allergic to?")
    assert (await tg.reply(OWNER)).text == "You are allergic to peanuts."
    await tg.idle()
    async with tg.app.session_factory() as s:
        assert list((await s.execute(select(Memory.content))).scalars()) == ["Allergic to peanuts"]
    results = [m["content"] for m in tg.llm.requests[-1]["messages"] if m["role"] == "tool"]
    # Read as the store its content makes it (which fails for want of a layer), never as
    # a forget.
    assert "store needs" in results[-1] and "forgot" not in results[-1], results


async def test_a_forget_the_message_did_not_ask_for_deletes_nothing(tg: TG) -> None:
    """Recorded by `bench/tool_use.py --model qwen2.5-coder-1.5b-instruct-q4_k_m --constrained
    off --show` (2026-12-06, temperature 0): asked a date difference, the 1.5B model recalled,
    then wrote `{"name": "memory", "arguments": {"action": "forget", "memory_id": 2}}` and
    the memory was gone. A forget runs only when the person's message asks for one."""
    store = '{"name": "memory", "arguments": {"action": "store", "layer": "long", '
    store += '"content": "Allergic to peanuts", "category": "fact"}}'
    tg.llm.add(Text(store), Text("Noted."))
    await tg.send(OWNER, "Remember that I'm allergic to peanuts.")
    assert (await tg.reply(OWNER)).text == "Noted."
    async with tg.app.session_factory() as s:
        (mid,) = (await s.execute(select(Memory.id))).scalars()

    forget = f'{{"name": "memory", "arguments": {{"action": "forget", "memory_id": {mid}}}}}'
    tg.llm.add(Text(forget), Text("358 days."))
    await tg.send(OWNER, "How many days are there from 2026-01-01 to 2026-12-25?")
    assert (await tg.reply(OWNER)).text == "358 days."
    await tg.idle()
    async with tg.app.session_factory() as s:
        assert list((await s.execute(select(Memory.content))).scalars()) == ["Allergic to peanuts"]
    results = [m["content"] for m in tg.llm.requests[-1]["messages"] if m["role"] == "tool"]
    assert results[-1].startswith("Error: Not forgotten"), results

    # Asked, it is forgotten.
    tg.llm.add(Text(forget), Text("Forgotten."))
    await tg.send(OWNER, "Please forget my allergy.")
    assert (await tg.reply(OWNER)).text == "Forgotten."
    await tg.idle()
    async with tg.app.session_factory() as s:
        assert list((await s.execute(select(Memory.content))).scalars()) == []
