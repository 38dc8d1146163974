"""Faults under load (issue 45): a turn a restart cut goes on where it was asked (a group's
in the group, not in the member's private chat)."""

from __future__ import annotations

from bot.telegram.resume import continue_cut_turns
from tests.conftest import sqlite_only
from tests.e2e.conftest import OWNER, TG
from tests.fakes.openai_server import Text

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
