"""A program that succeeded and printed nothing says so to the model (tools/code/tool.py):
its value never reached it. The 0.5B model of the real tier wrote `12345 * 6789` without
console.log, read `"stdout": ""` as done and answered with a number of its own
(bench/tool_use.py, 2026-12-06)."""

from __future__ import annotations

import json

from tests.e2e.conftest import OWNER, TG
from tests.fakes.openai_server import Calls, Text
from tools.code.tool import PRINTED_NOTHING


def results(tg: TG) -> list[dict[str, object]]:
    messages = tg.llm.requests[-1]["messages"]
    return [json.loads(m["content"]) for m in messages if m["role"] == "tool"]


async def test_a_run_that_printed_nothing_tells_the_model_to_print(tg: TG) -> None:
    tg.llm.add(
        Calls([("code", {"action": "execute", "code": "12345 * 6789"})]),
        Calls([("code", {"action": "execute", "code": "console.log(12345 * 6789)"})]),
        Text("It is 83810205."),
    )
    await tg.send(OWNER, "What is 12345 times 6789?")
    assert (await tg.reply(OWNER)).text == "It is 83810205."
    silent, printed = results(tg)
    assert silent["success"] and silent["stdout"] == "" and silent["note"] == PRINTED_NOTHING
    assert printed["stdout"].strip() == "83810205" and "note" not in printed


async def test_a_run_that_failed_silently_is_not_told_to_print(tg: TG) -> None:
    tg.llm.add(
        Calls([("code", {"action": "execute", "code": "process.exit(3)"})]),
        Text("It failed."),
    )
    await tg.send(OWNER, "Run a program that exits with 3.")
    assert (await tg.reply(OWNER)).text == "It failed."
    (failed,) = results(tg)
    assert not failed["success"] and "note" not in failed
