"""Faults under load (issue 45): a turn a restart cut goes on where it was asked (a group's
in the group, not in the member's private chat), and a tool call the restart cut mid-run is
run again only when its tool declares it writes nothing; a writing one is reported to the
person instead (the kill -9 cases of a whole process are in test_resume_kill.py)."""

from __future__ import annotations

import asyncio

from pydantic import BaseModel

from bot.agent.toolexec import CUT_TEXT
from bot.app import App
from bot.telegram.resume import continue_cut_turns
from tests.conftest import sqlite_only
from tests.e2e.conftest import OWNER, TG
from tests.fakes.openai_server import Calls, Text
from tools.base import Tool, ToolCall
from tools.effects import effects
from tools.registry import Registry

GROUP = -100777


# As test_resume.py's first test: on PostgreSQL the stop may cut the stream first.
@sqlite_only
async def test_a_group_message_cut_by_a_restart_is_continued_in_the_group(tg: TG) -> None:
    tg.llm.add(Text("x" * 400, chunk=1, delay=0.05))  # far beyond the grace period
    await tg.send(OWNER, "@sidekick_test_bot the group's question", chat_id=GROUP)
    await tg.server.wait_for(lambda: len(tg.llm.requests) == 1)
    await tg.stop(grace=0.2)
    await tg.start()
    tg.llm.add(Text("the whole answer"))
    assert await continue_cut_turns(tg.runtime, tg.app.deps.clock()) == 1
    await tg.idle()
    texts = [m.text for m in await tg.replies(GROUP, 2)]
    assert texts == [
        "I was restarted while answering “the group's question”; continuing.",
        "the whole answer",
    ]
    assert tg.server.sent_to(OWNER) == []  # nothing in the member's private chat
    assert await continue_cut_turns(tg.runtime, tg.app.deps.clock()) == 0


class Params(BaseModel):
    what: str


def with_slow_tools(tg: TG, ran: list[str], go: asyncio.Event) -> None:
    """`send` writes (it runs code), `look` only reads; both wait for `go` on their first
    run, so a restart cuts them mid-run; after that they return at once."""

    async def run(p: Params, call: ToolCall) -> str:
        ran.append(p.what)
        if ran.count(p.what) == 1:
            await go.wait()
        return f"{p.what}: done"

    def install(app: App) -> None:
        app.agent.registry = Registry([
            Tool("send", "Send it", Params, run, effects=effects(writes=("execution",))),
            Tool("look", "Look it up", Params, run, effects=effects(reads=("files",))),
        ])  # fmt: skip

    install(tg.app)
    tg.on_build.append(install)


@sqlite_only
async def test_a_writing_call_a_restart_cut_is_reported_not_run_again_and_a_read_runs(
    tg: TG,
) -> None:
    ran: list[str] = []
    with_slow_tools(tg, ran, asyncio.Event())  # never set: the calls hang until the stop
    tg.llm.add(Calls([("send", {"what": "sent"}), ("look", {"what": "looked"})]))
    await tg.send(OWNER, "send the report and look up the total")
    await tg.server.wait_for(lambda: sorted(ran) == ["looked", "sent"])
    await tg.stop(grace=0.2)  # both calls in flight
    await tg.start()
    tg.llm.add(Text("The report may not have gone out; the total is known."))
    assert await continue_cut_turns(tg.runtime, tg.app.deps.clock()) == 1
    await tg.idle()
    continuing, answer = await tg.replies(OWNER, 2)
    assert continuing.text.startswith("I was restarted while answering")
    assert answer.text.startswith("The report may not have gone out")
    assert "I was restarted while running send; it may or may not have finished." in answer.text
    assert sorted(ran) == ["looked", "looked", "sent"]  # the read again, the write not
    results = {m["tool_call_id"]: m["content"] for m in tg.llm.requests[-1]["messages"]
               if m["role"] == "tool"}  # fmt: skip
    assert len(results) == 2
    sent, looked = results.values()
    assert sent == CUT_TEXT and looked == "looked: done"
