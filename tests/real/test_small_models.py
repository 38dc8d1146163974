"""What a small model does through the assembled app on the real server (see conftest.py),
issue 46's proof with the real 0.5B model: a tool call it writes out as text stores a memory
that /memory lists and a new session recalls; a reminder it was asked for is put to the
person, allowed and created; a long chat is compressed in a 4,096-token context while the
turns go on without waiting for the summary (the proxy holds it back); and each turn
re-processes no more of the prompt than the new turn and the last answer (plus a few
template tokens). That no template markup reaches the person is checked after every test
of the tier (conftest.py, the `bot` fixture)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from sqlalchemy import select

from bot.agent import prompt as history
from bot.sessions.history import COMPRESSIONS, WRITE
from bot.sessions.models import SessionCompression
from tests.e2e.conftest import OWNER, TG
from tests.e2e.test_approvals_e2e import button
from tests.fakes.telegram_server import Sent
from tests.polling import until
from tests.prompt_blocks import earlier_of
from tests.real.proxy import RecordingProxy
from tests.real.servers import LlamaServer
from tests.real.test_llama_server import WAIT, ask, streamed_text
from tools.memory.models import Memory
from tools.memory.recall_context import HEADER
from tools.reminders.models import ScheduledJob

pytestmark = pytest.mark.timeout(1500)
# Template tokens around a turn (role markers, newlines) that the goal allows for; held (the
# default), the last answer was made inside its JSON and its stored text tokenizes apart
# from it where the two differ (measured one token over 20).
SLACK = 24


async def test_a_written_call_stores_a_memory_that_memory_lists_and_a_new_session_recalls(
    bot: TG, proxy: RecordingProxy
) -> None:
    # The 0.5B model writes a call of whichever tool comes first in the request (`code`, for
    # "Remember that my sister's name is Ana." in 3 of 3 greedy runs; `memory` for a sum, once
    # memory came first: bench/tool_use.py measures the choice). Named, the tool is its pick,
    # and what this proves is the written call's way through the app: run, stored, listed,
    # recalled.
    proxy.greedy = True
    await ask(bot, "Use the memory tool to remember that my sister's name is Ana.")
    first, *rest = proxy.chats()
    said = streamed_text(first)
    assert not first.tool_calls() and '"name"' in said, said  # written out, not sent
    assert rest, f"the written call did not run: {said!r}"
    sent = rest[0].request["messages"]
    (asked,) = [m for m in sent if m["role"] == "assistant" and m.get("tool_calls")]
    assert asked["tool_calls"][0]["function"]["name"] == "memory"
    async with bot.app.session_factory() as s:
        stored = list((await s.execute(select(Memory.content))).scalars())
    assert any("Ana" in c for c in stored), (stored, [m for m in sent if m["role"] == "tool"])
    for text in [m.text or "" for m in bot.server.sent_to(OWNER)]:
        assert '"arguments"' not in text and '"name"' not in text, text
    await bot.send(OWNER, "/memory")
    listing = await bot.reply(OWNER, timeout=WAIT)
    assert any(c in (listing.text or "") for c in stored if "Ana" in c), listing.text
    # Recalled (issue 46 Done when): in a new session, whose history does not hold the turn
    # that stored it, the question brings the fact into what the model reads.
    await bot.send(OWNER, "/newsession")
    await bot.reply(OWNER, timeout=WAIT)
    before = len(proxy.chats())
    question = "What is my sister's name?"
    # Offered tools, the 0.5B model answers this with memory and code calls (a minute of
    # rounds); what is proved here is what it reads, in the first request.
    proxy.without_tools = True
    await ask(bot, question)
    x = next(c for c in proxy.chats()[before:] if question in str(c.request["messages"][-1]))
    read = "\n".join(str(m.get("content")) for m in x.request["messages"])
    assert "Use the memory tool" not in read  # a new session: the storing turn is not shown
    assert HEADER in read and any(c in read for c in stored if "Ana" in c), read[-1500:]


async def test_a_reminder_asked_for_is_created_once_the_person_allows_it(
    bot: TG, proxy: RecordingProxy
) -> None:
    # The server says the model is small (llama-server's meta.n_params, 494M): a reminder it
    # creates, even one the message asked for, is put to the person first (issue 46 item 7).
    # Asked plainly ("Remind me in 30 minutes to call Ana.", and four other wordings), the
    # 0.5B model writes a `schedule` call with every field filled (`at` now, `in_minutes` 30,
    # `every` "daily_at", `daily_at` a date), which the tool rightly refuses as two times;
    # told which fields, it writes a call the tool takes: `when` the prompt's own clock beside
    # `in_minutes` 30 (a time that reads as this very minute, which leaves the fields standing:
    # tools/reminders/parse.py). What this proves is the way of a reminder asked for through
    # the app: asked, allowed, created, listed.
    proxy.greedy = True
    await bot.send(
        OWNER, "Remind me in 30 minutes to call Ana (schedule: action create, text, in_minutes "
        "30; nothing else)."
    )  # fmt: skip

    def questions() -> list[Sent]:
        return [m for m in bot.server.sent_to(OWNER) if m.reply_markup and "may I" in m.text]

    def answered() -> bool:  # the turn ended without a question
        return any(not m.text.startswith("Still waiting") for m in bot.server.sent_to(OWNER))

    await bot.server.wait_for(lambda: bool(questions()) or answered(), WAIT)
    said = [streamed_text(x) for x in proxy.chats()]
    assert questions(), (said, [m.text for m in bot.server.sent_to(OWNER)])
    (question,) = questions()
    assert "schedule" in question.text, question.text
    assert await jobs(bot) == [], "created before the person allowed it"
    await bot.press(OWNER, button(question, "Allow once"), question.message_id)
    await until(lambda: jobs(bot), f"the reminder is created once allowed: {said}", WAIT)
    await bot.idle(timeout=WAIT)
    ((text, status),) = await jobs(bot)
    assert status == "active", status
    # The turn went on after the press and was answered.
    assert bot.server.sent_to(OWNER)[-1].message_id > question.message_id
    await bot.send(OWNER, "/reminders")
    await bot.server.wait_for(lambda: text in (bot.server.sent_to(OWNER)[-1].text or ""), WAIT)


async def jobs(bot: TG) -> list[tuple[str, str]]:
    async with bot.app.session_factory() as s:
        return [tuple(r) for r in await s.execute(select(ScheduledJob.text, ScheduledJob.status))]


def summarising(body: dict[str, Any]) -> bool:
    return str(body["messages"][0]["content"]).startswith(WRITE.instruction[:40])


def answers_at(bot: TG) -> list[int]:
    """Where in the fake Telegram's calls each answer to the person was sent."""
    chat = str(OWNER)
    return [i for i, c in enumerate(bot.server.calls)
            if c.method == "sendMessage" and str(c.params.get("chat_id")) == chat]  # fmt: skip


async def test_a_long_chat_is_compressed_in_a_4k_context_and_no_turn_waits_for_it(
    bot: TG, proxy: RecordingProxy, chat_server: LlamaServer
) -> None:
    assert chat_server.get("/props")["default_generation_settings"]["n_ctx"] == 4096
    proxy.greedy = True
    # What is summarised and when does not depend on the tools; offered them, the 0.5B model
    # writes a call out for every note (a second round each, twice the tier's time).
    proxy.without_tools = True
    # No turn waits for a summary (issue 46 item 4): the proxy keeps the summary call from the
    # server until the turn that found it due and the next one are answered. A turn that
    # waited for it would wait forever.
    proxy.hold(summarising)
    # ~540 tokens a message: 3 outgrow the 1,500-token history budget a 4k context leaves
    # (4,096 - 96 answer - 2,500 prefix); a summary is due once what would be cut holds as
    # much as one summary call reads (2,596 tokens: 4,096 - 600 answer - 900 instruction).
    pad = " I spent the afternoon in the garden planting tomatoes and basil." * 32
    await ask(bot, "My locker code at the gym is 4711." + pad)
    for i in range(2, 10):
        await ask(bot, f"Note {i}: the weather was mild today.{pad}")
        if proxy.held():
            break
    assert proxy.held(), "the history outgrew its budget but no summary was asked for"
    (summary,) = proxy.held()
    await ask(bot, "Another note: the weather was mild today." + pad)
    assert summary.answering is None, "the summary was answered before the turns it ran beside"
    # The order of what was recorded: the summary was asked for (after or beside the answer
    # of the turn that found it due); the next turn was asked of the model and its answer
    # reached the person; only then did anything of the summary come back.
    after = proxy.exchanges[proxy.exchanges.index(summary) + 1 :]
    meanwhile = next(x for x in after if x.path.endswith("/chat/completions"))
    answered = answers_at(bot)[-1]
    # Meanwhile the oldest turns were left out and the model was told so.
    assert "[not shown]" in earlier_of(meanwhile.request["messages"][1]["content"])
    proxy.release()
    await bot.app.part(COMPRESSIONS).idle()
    assert summary.answering is not None and summary.arrived < answered < summary.answering, (
        summary.arrived, answered, summary.answering)  # fmt: skip
    async with bot.app.session_factory() as s:
        rows = list((await s.execute(select(SessionCompression))).scalars())
    assert rows, f"the summary was asked for but nothing was stored ({summary.status})"
    await ask(bot, "One more note: the weather was mild today.")
    last = next(c for c in reversed(proxy.chats()) if "[context]" in str(c.request["messages"]))
    assert last.status == 200
    system, first, *_ = last.request["messages"]
    assert system["role"] == "system" and "[compressed]" not in system["content"]
    if not any(r.verified for r in rows):
        # The 0.5B model's summary named what nobody said (in one of two CI runs: "Today is
        # [date]", from its own answers): refused, it is used nowhere; the turns are trimmed.
        sent = str(last.request["messages"])
        assert "[compressed]" not in sent
        assert all(not r.summary or r.summary[:60] not in sent for r in rows), rows
        return
    # The note rides at the cut, in an [earlier] block of the first turn shown; the system
    # message (and the tool schemas after it) stay the prefix every request starts with.
    assert first["role"] == "user" and "[compressed] Turns 1–" in first["content"], first


async def test_each_turn_re_processes_only_the_new_turn_and_the_last_answer(
    bot: TG, proxy: RecordingProxy, chat_server: LlamaServer
) -> None:
    proxy.greedy = True
    for text in ("Say hi in two words.", "Now say bye in two words.", "Name a fruit."):
        await ask(bot, text)
    chats = proxy.chats()
    for before, x in itertools.pairwise(chats):
        messages = x.request["messages"]
        new_turn = messages[-1]["content"]
        answer = streamed_text(before)

        def tokens(text: str) -> int:
            return len(chat_server.post("/tokenize", {"content": text})["tokens"])

        goal = tokens(new_turn) + tokens(answer) + SLACK
        assert x.timings["prompt_n"] <= goal, (
            f"re-processed {x.timings['prompt_n']} tokens, goal {goal} (new turn "
            f"{tokens(new_turn)}, last answer {tokens(answer)}, +{SLACK})"
        )


@pytest.fixture(autouse=True)
def _budget_as_shipped() -> None:
    # The history budget follows the server's context (-c 4096): nothing is lowered here.
    assert history.HISTORY_TOKEN_BUDGET == 6000
