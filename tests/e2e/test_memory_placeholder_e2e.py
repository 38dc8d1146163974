"""A memory that is a template with a slot left to fill is no fact (tools/memory/tool.py):
the 0.5B model of the real tier, asked "What is my sister's name?", stored "my sister's
name is [sister's name]" (bench/tool_use.py, 2026-12-06), and recall found it as what the
person had said. Every word of it is theirs, so grounding alone let it through. A slot the
person wrote themselves is their words, and kept."""

from __future__ import annotations

import json

from sqlalchemy import select

from tests.e2e.conftest import OWNER, TG
from tests.fakes.openai_server import Calls, Text
from tools.memory.models import Memory


async def memories(tg: TG) -> list[str]:
    async with tg.app.session_factory() as s:
        return list((await s.execute(select(Memory.content).order_by(Memory.id))).scalars())


def store(content: str) -> Calls:
    return Calls([("memory", {"action": "store", "layer": "long", "content": content})])


def last_result(tg: TG) -> str:
    messages = tg.llm.requests[-1]["messages"]
    return str([m["content"] for m in messages if m["role"] == "tool"][-1])


async def test_a_placeholder_is_not_stored_and_the_model_hears_why(tg: TG) -> None:
    tg.llm.add(store("My sister's name is [sister's name]"), Text("I do not know her name."))
    await tg.send(OWNER, "What is my sister's name?")
    assert (await tg.reply(OWNER)).text == "I do not know her name."
    await tg.idle()
    assert await memories(tg) == []
    result = last_result(tg)
    assert result.startswith("Error: Not stored:") and "[sister's name]" in result, result


async def test_brackets_the_person_wrote_are_theirs(tg: TG) -> None:
    said = "Remember that my login prompt says <user>@home."
    tg.llm.add(store("Login prompt says <user>@home"), Text("Noted."))
    await tg.send(OWNER, said)
    assert (await tg.reply(OWNER)).text == "Noted."
    await tg.idle()
    assert await memories(tg) == ["Login prompt says <user>@home"], json.dumps(last_result(tg))
