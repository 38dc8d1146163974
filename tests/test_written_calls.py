"""bot/llm/written.py: which texts are written tool calls, what stays text, and what the
streamed drafts may show while a reply may be starting one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.llm import written
from bot.llm.completion import Completion

FIXTURES = Path(__file__).parent / "fixtures" / "llm" / "written"
OFFERED = ["search", "code", "memory", "schedule", "web_fetch"]


def calls(text: str, offered: list[str] = OFFERED) -> list[tuple[str, dict[str, object]]]:
    found = written.find(text, offered)
    return [(c.name, json.loads(c.arguments)) for c in found.calls] if found else []


@pytest.mark.parametrize(
    ("fixture", "name", "key", "value"),
    [
        ("fenced-memory-recall.txt", "memory", "query", "Sister's name"),
        ("bare-schedule-create.txt", "schedule", "in_minutes", 2),
        ("prose-fenced-search-imagined-result.txt", "search", "query", "Python release"),
        ("bare-memory-recall-0.5b.txt", "memory", "action", "recall"),
        ("tagged-memory-store.txt", "memory", "content", "Sister is called Ana"),
        ("mistral-memory-store.txt", "memory", "content", "Sister is called Ana"),
    ],
)
def test_recorded_forms(fixture: str, name: str, key: str, value: object) -> None:
    ((got, args),) = calls((FIXTURES / fixture).read_text())
    assert got == name and args[key] == value


def test_a_javascript_template_string_becomes_the_code() -> None:
    ((name, args),) = calls((FIXTURES / "fenced-code-backticks.txt").read_text())
    assert name == "code" and "console.log(fibonacci(30));" in str(args["code"])


@pytest.mark.parametrize(
    "text",
    [
        '<function=memory>{"action": "list"}</function>',
        '<|python_tag|>{"name": "memory", "parameters": {"action": "list"}}',
        '[TOOL_CALLS]memory[ARGS]{"action": "list"}',
        '{"type": "function", "function": {"name": "memory", '
        '"arguments": "{\\"action\\": \\"list\\"}"}}',
        '{"name": "memory", "action": "list"}',
        '<tool_call>\n{"name": "memory", "arguments": {"action": "list"}}',  # no closing tag
    ],
)
def test_other_template_forms(text: str) -> None:
    assert calls(text) == [("memory", {"action": "list"})]


def test_several_calls_one_per_line() -> None:
    text = (
        '{"name": "memory", "arguments": {"action": "list"}}\n{"name": "schedule", "arguments": {}}'
    )
    assert [n for n, _ in calls(text)] == ["memory", "schedule"]


@pytest.mark.parametrize(
    "text",
    [
        (FIXTURES / "doubled-braces-unknown-tool.txt").read_text(),  # get_weather: not offered
        '```json\n{"name": "Ana", "age": 7}\n```',
        '```python\n{"name": "memory", "arguments": {}}\n```',
        "Use `memory` to store facts.",
        "{not json at all}",
    ],
)
def test_what_stays_text(text: str) -> None:
    assert written.find(text, OFFERED) is None


def test_adopt_sets_the_calls_and_keeps_the_prose_before() -> None:
    done = Completion(content='I will check.\n{"name": "memory", "arguments": {"action": "list"}}')
    done.finish_reason = "stop"
    written.adopt(done, OFFERED)
    assert [c.name for c in done.tool_calls] == ["memory"] and done.written == 1
    assert done.content == "I will check." and done.finish_reason == "tool_calls"


async def test_drafts_never_show_a_call_being_written() -> None:
    shown: list[str] = []

    async def on_text(text: str) -> None:
        shown.append(text)

    hold = written.Holdback(on_text, OFFERED)
    text = 'Let me look.\n```json\n{"name": "memory", "arguments": {"action": "list"}}\n```'
    for n in range(1, len(text) + 1):
        await hold(text[:n])
    assert shown and all("{" not in s and "`" not in s for s in shown)
    assert shown[-1] == "Let me look.\n"


async def test_drafts_show_json_that_is_no_call_once_it_is_closed() -> None:
    shown: list[str] = []

    async def on_text(text: str) -> None:
        shown.append(text)

    hold = written.Holdback(on_text, OFFERED)
    text = 'Here:\n{"city": "Paris"}\nDone.'
    for n in range(1, len(text) + 1):
        await hold(text[:n])
    assert shown[-1] == text
