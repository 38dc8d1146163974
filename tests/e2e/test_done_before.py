"""A call that already succeeded in the request is not run again (bot/agent/toolexec.py
`done_before`): the small model, its result in hand, writes the same call again instead of
answering. Recorded by `bench/tool_use.py --model qwen2.5-coder-1.5b-instruct-q4_k_m
--constrained off --show` (2026-12-06): "List my reminders." wrote the fenced list call three
times; "What is 12345 times 6789?" ran its program twice (the second time with the `action`
it had left out), then answered "To continue the conversation, I can ask you about what
you'd like to do next."."""

from __future__ import annotations

from sqlalchemy import select

from tests.e2e.conftest import OWNER, TG
from tests.fakes.openai_server import Text
from tools.memory.models import Memory

LIST = '```json\n{ "name": "schedule", "arguments": { "action": "list", "kind": "reminder" } }\n```'
LIST_BARE = '{"name": "schedule", "arguments": {"action": "list", "kind": "reminder"}}'


def tool_results(tg: TG) -> list[str]:
    return [m["content"] for m in tg.llm.requests[-1]["messages"] if m["role"] == "tool"]


async def test_a_call_repeated_after_its_result_is_not_run_and_the_result_is_shown(
    tg: TG,
) -> None:
    tg.llm.add(Text(LIST), Text(LIST_BARE), Text("never asked for"))
    await tg.send(OWNER, "List my reminders.")
    reply = (await tg.reply(OWNER)).text
    assert "No reminders or tasks scheduled." in reply, reply
    assert "never asked for" not in reply
    # The model was asked twice: the repeated call ended the turn, it ran once.
    assert len(tg.llm.requests) == 2
    assert len(tool_results(tg)) == 1


async def test_a_write_repeated_with_the_action_it_left_out_is_not_done_twice(tg: TG) -> None:
    first = '{"name": "memory", "arguments": {"layer": "long", "content": "Allergic to peanuts"}}'
    again = '{"name": "memory", "arguments": {"action": "store", "layer": "long", '
    again += '"content": "Allergic to peanuts"}}'
    tg.llm.add(Text(first), Text(again), Text("never asked for"))
    await tg.send(OWNER, "Remember that I'm allergic to peanuts.")
    reply = (await tg.reply(OWNER)).text
    assert "stored #" in reply and "never asked for" not in reply, reply
    await tg.idle()
    async with tg.app.session_factory() as s:
        stored = list((await s.execute(select(Memory.content))).scalars())
    assert stored == ["Allergic to peanuts"]
    assert len(tg.llm.requests) == 2


async def test_the_same_read_with_other_arguments_still_runs(tg: TG) -> None:
    tg.llm.add(
        Text(LIST),
        Text('{"name": "schedule", "arguments": {"action": "list", "kind": "task"}}'),
        Text("You have no reminders or tasks."),
    )
    await tg.send(OWNER, "List my reminders and tasks.")
    assert (await tg.reply(OWNER)).text == "You have no reminders or tasks."
    assert len(tool_results(tg)) == 2


async def test_a_read_after_a_write_runs_again(tg: TG) -> None:
    """list, create, list: what the first list read has changed, so the second one runs."""
    create = '{"name": "schedule", "arguments": {"action": "create", "text": "stretch", '
    create += '"in_minutes": 2}}'
    tg.llm.add(Text(LIST), Text(create), Text(LIST_BARE), Text("One: stretch."))
    await tg.send(OWNER, "List my reminders, then remind me in 2 minutes to stretch.")
    assert (await tg.reply(OWNER)).text == "One: stretch."
    results = tool_results(tg)
    assert len(results) == 3 and "stretch" in results[-1], results


async def test_the_person_reads_what_the_repeated_call_found_not_the_last_round(tg: TG) -> None:
    """Recorded by `bench/tool_use.py --model qwen2.5-coder-1.5b-instruct-q4_k_m --constrained
    auto --show` (2026-12-06): "What is my sister's name?" recalled, then tried to forget the
    memory (refused: not asked), then wrote the recall again. The turn ends with what the
    recall found, not with the refused forget's nothing."""
    store = '{"name": "memory", "arguments": {"action": "store", "layer": "short", '
    store += '"content": "My sister\'s name is Ana.", "category": "goal"}}'
    tg.llm.add(Text(store), Text("Noted."))
    await tg.send(OWNER, "Remember that my sister's name is Ana.")
    assert (await tg.reply(OWNER)).text == "Noted."
    recall = '{ "name": "memory", "arguments": { "action": "recall", "layer": "short", '
    recall += '"query": "My sister\'s name", "memory_id": 1 } }'
    forget = '{"name": "memory", "arguments": {"action": "forget", "memory_id": 1}}'
    tg.llm.add(Text(recall), Text(forget), Text(recall), Text("never asked for"))
    await tg.send(OWNER, "What is my sister's name?")
    reply = (await tg.reply(OWNER)).text
    assert "Ana" in reply and "never asked for" not in reply, reply
    await tg.idle()
    async with tg.app.session_factory() as s:
        assert list((await s.execute(select(Memory.content))).scalars()) == [
            "My sister's name is Ana."
        ]
