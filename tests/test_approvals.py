"""What a tool declares (MCP annotations included), the policy that reads it, the gate's
bookkeeping, and the terminal's y/n."""

from __future__ import annotations

import asyncio
from asyncio.subprocess import Process
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest

from bot.app import App
from bot.approvals import repo
from bot.approvals.gate import APPROVALS, DENIED, NOBODY, Question, action_text, needs_approval
from bot.approvals.questions import Doorbell
from db.engine import create_engine, session_factory
from db.migrate import upgrade
from db.repos import core
from tests.conftest import make_settings
from tests.fakes.openai_server import Calls, FakeOpenAI, Text
from tests.test_terminal_chat import chat_env, run_chat, start_chat
from tests.tools_helpers import write_mcp_config
from tools.base import RequestContext, Tool, ToolCall
from tools.effects import OUTSIDE_MARK, Effects, effects, from_mcp
from tools.mcp.convert import build_tool
from tools.memory.tool import MEMORY_EFFECTS, MemoryParams
from tools.reminders.repo import add_job

CODE_NET = effects(writes=("execution", "internet"))
CODE = effects(writes=("execution",))


def hints(**kw: Any) -> types.ToolAnnotations:
    return types.ToolAnnotations(**kw)


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        (None, effects(writes=("internet",))),  # says nothing: it writes
        (hints(), effects(writes=("internet",))),
        (hints(read_only_hint=True), effects(reads=("internet",))),
        (hints(read_only_hint=True, open_world_hint=False), effects(reads=("files",))),
        (hints(read_only_hint=False, open_world_hint=False), effects(writes=("files",))),
        (hints(destructive_hint=False), effects(writes=("internet",))),
    ],
)
def test_mcp_effects_come_from_the_annotations(
    annotations: types.ToolAnnotations | None, expected: Effects
) -> None:
    remote = types.Tool(name="t", input_schema={"type": "object"}, annotations=annotations)

    async def call(name: str, args: dict[str, Any]) -> types.CallToolResult:
        raise AssertionError("not called")

    # Whatever the annotations say, its answer is outside content (another program's).
    source = "the MCP tool srv/t"
    expected = replace(expected, outside=source)
    assert build_tool("srv", remote, call).effects == expected == from_mcp(annotations, source)


@pytest.mark.parametrize(
    ("fx", "scheduled", "deletions", "risky"),
    [
        (CODE_NET, False, 0, False),  # code the user's own words asked for, network or not
        (CODE_NET, True, 0, True),  # in a scheduled task
        (CODE, False, 0, False),  # code without: only in a scheduled task
        (CODE, True, 0, True),
        (effects(writes=("internet",)), False, 0, True),  # an MCP tool that writes
        (effects(writes=("files",)), False, 0, True),
        (effects(reads=("internet", "files")), True, 5, False),  # reading never asks
        (MEMORY_EFFECTS["store"], True, 3, False),
        (MEMORY_EFFECTS["forget"], False, 0, False),  # the first forget of a message
        (MEMORY_EFFECTS["forget"], False, 1, True),  # the second
    ],
)
def test_the_risky_policy(fx: Effects, scheduled: bool, deletions: int, risky: bool) -> None:
    assert needs_approval("risky", fx, scheduled=scheduled, deletions=deletions) is risky
    assert not needs_approval("off", fx, scheduled=scheduled, deletions=deletions)
    assert needs_approval("all", fx, scheduled=scheduled, deletions=deletions) is bool(fx.writes)
    # After outside content, every call that writes asks but code without the network
    # (nothing it read can leave: issue 45 item 4); reading still does not.
    after = needs_approval("risky", fx, scheduled=scheduled, deletions=deletions, outside=True)
    assert after is (bool(fx.writes) and (fx != CODE or scheduled))


def test_action_text_is_whole_and_shows_what_is_invisible() -> None:
    text = action_text("code", {"action": "execute", "code": "console.log(1)\nx()", "n": None})
    assert text == "code\naction: execute\ncode: console.log(1)\nx()"
    long = action_text("code", {"code": "y" * 5000 + "payload()"})
    assert long.endswith("payload()")  # nothing cut: the adapter sends a long one as a file
    hidden = action_text("code", {"code": "a\u202eb\u200bc\u2066d\x1be\tf"})
    assert hidden == "code\ncode: a\\u202eb\\u200bc\\u2066d\\u001be\tf"


async def test_the_second_forget_of_a_message_asks_and_the_audit_keeps_it(app: App) -> None:
    gate = app.part(APPROVALS)
    assert gate is not None
    asked: list[Question] = []

    async def asker(q: Question) -> Any:
        asked.append(q)
        return "deny"

    gate.asker = asker

    async def forget(p: MemoryParams, call: ToolCall) -> str:
        return "forgot"

    tool = Tool("memory", "", MemoryParams, forget, effects=lambda p: MEMORY_EFFECTS[p.action])
    ctx = RequestContext("r1", 1, 1, None, user_name="Ann", telegram_user_id=77)
    async with app.session_factory() as s, s.begin():
        ctx.user_id = (await core.get_or_create_user(s, 77, "Ann", app.deps.clock())).id
    call = ToolCall(ctx, "c1")
    args = {"action": "forget", "memory_id": 1}
    params = MemoryParams.model_validate(args)
    assert await gate.check(tool, params, args, call) is None and asked == []
    assert await gate.check(tool, params, args, call) == DENIED
    assert asked[0].action == "memory\naction: forget\nmemory_id: 1" and asked[0].user_name == "Ann"
    [row] = await repo.log(app.session_factory, ctx.user_id)
    assert (row.decision, row.tool, row.by_telegram_id) == ("denied", "memory", 77)
    gate.asker = None  # nobody to ask (a bench, a script): not run
    assert await gate.check(tool, params, args, call) == NOBODY


@pytest.mark.db
async def test_the_terminal_asks_y_or_n(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    """`sidekick chat` with the fake MCP server (its tools carry no annotations: they write)."""
    cfg = write_mcp_config(tmp_path)
    call = Calls([("tool_explain", {"name": "fake__email_send"})])
    send = Calls([("fake__email_send", {"target": "bob", "query": "sk-terminal-secret"})])
    fake_llm.add(call, send, Text("Sent it."), call, send, Text("Did not send."))
    stdin = "mail bob\ny\nmail bob again\nn\n"
    code, out, err = await run_chat(tmp_path, fake_llm, stdin, MCP_CONFIG=str(cfg))
    assert code == 0, err
    assert out.count("May I do this?") == 2 and "fake__email_send" in out
    assert "sk-terminal-secret" not in out and "[secret]" in out
    results = [m["content"] for m in fake_llm.requests[2]["messages"] if m["role"] == "tool"]
    # An MCP tool's result is outside content, marked so (docs/security.md#approvals).
    marker, result = results[-1].split("\n", 1)
    assert marker.startswith(OUTSIDE_MARK) and result.startswith("email_send ok")
    results = [m["content"] for m in fake_llm.requests[5]["messages"] if m["role"] == "tool"]
    assert results[-1] == DENIED
    assert "Sent it." in out and "Did not send." in out


async def read_until(proc: Process, out: bytearray, text: bytes) -> None:
    assert proc.stdout is not None
    while text not in out:
        chunk = await asyncio.wait_for(proc.stdout.read(4096), 60)
        assert chunk, out.decode()
        out += chunk


@pytest.mark.db
async def test_the_terminal_question_times_out_and_the_next_line_goes_to_the_chat(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    cfg = write_mcp_config(tmp_path)
    call = Calls([("tool_explain", {"name": "fake__email_send"})])
    fake_llm.add(call, Calls([("fake__email_send", {"target": "bob"})]), Text("Not sent."))
    env = chat_env(tmp_path, fake_llm, MCP_CONFIG=str(cfg))
    proc = await start_chat(
        tmp_path, env, prelude="import bot.approvals.gate as a; a.TIMEOUT_S = 0.5"
    )
    assert proc.stdin is not None and proc.stdout is not None
    out = bytearray()
    try:
        proc.stdin.write(b"mail bob\n")
        await read_until(proc, out, b"Not sent.")  # the question went unanswered
        assert b"No answer in time" in out
        proc.stdin.write(b"hello after\n")  # not swallowed by the question's read
        await read_until(proc, out, b"echo: hello after")
        proc.stdin.close()
        await asyncio.wait_for(proc.wait(), 60)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert "did not answer" in str(fake_llm.requests[2]["messages"][-1]["content"])


@pytest.mark.db
async def test_a_scheduled_task_in_the_terminal_asks_at_the_prompt_and_waits(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    cfg = write_mcp_config(tmp_path)
    # The local user's task, come due while the chat was closed. (Made through the model in
    # a chat of its own, as test_reminders_terminal.py makes a reminder, it would be one
    # more process start for the same rows.)
    settings = make_settings(tmp_path, fake_llm)  # SQLite: a copy of the migrated template
    engine = create_engine(settings.db_url)
    if settings.database_url is not None:  # PostgreSQL's database of the test starts empty
        await upgrade(engine)
    async with session_factory(engine)() as s, s.begin():
        due = datetime.now(UTC).replace(microsecond=0) - timedelta(minutes=1)
        local = await core.get_or_create_user(s, None, "", due)
        await add_job(s, user_id=local.id, kind="task", text="mail bob the report",
                      words="in 5 minutes", schedule="at", timezone="UTC", first_at=due,
                      next_run_at=due, status="active", created_at=due)  # fmt: skip
    await engine.dispose()

    call = Calls([("tool_explain", {"name": "fake__email_send"})])
    fake_llm.add(call, Calls([("fake__email_send", {"target": "bob"})]), Text("Mailed bob."))
    proc = await start_chat(tmp_path, chat_env(tmp_path, fake_llm, MCP_CONFIG=str(cfg)))
    assert proc.stdin is not None and proc.stdout is not None
    out = bytearray()
    await read_until(proc, out, b"Allow?")  # the task started at startup waits for the answer
    proc.stdin.write(b"y\n")
    await read_until(proc, out, b"Mailed bob.")
    proc.stdin.write(b"/quit\n")
    await asyncio.wait_for(proc.wait(), 60)
    results = [m["content"] for m in fake_llm.requests[-1]["messages"] if m["role"] == "tool"]
    # An MCP tool's result is outside content, marked so (docs/security.md#approvals).
    marker, result = results[-1].split("\n", 1)
    assert marker.startswith(OUTSIDE_MARK) and result.startswith("email_send ok")


async def test_a_press_in_this_process_wakes_the_questions_waiting_for_it() -> None:
    bell = Doorbell()
    with bell.waiting(7) as first, bell.waiting(7) as second, bell.waiting(8) as other:
        bell.ring(7)
        assert first.is_set() and second.is_set() and not other.is_set()
    bell.ring(7)  # nobody waits any more: nothing to wake
