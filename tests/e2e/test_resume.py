"""A turn a stop cut is continued at the next start (bot/telegram/resume.py), in the
assembled app: from its recorded rows (a recorded tool call is not run again), with one
line that it continues, then the answer; a turn the error line answered is left alone; and
on PostgreSQL two workers starting together continue a turn once. The kill -9 cases, with a
real `sidekick run` process, are in test_resume_kill.py."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select, update

from bot.app import build_app
from bot.llm.client import LLMClient
from bot.telegram.dispatcher import Runtime, build_runtime
from bot.telegram.resume import RESTART_WINDOW, continue_cut_turns, continuing_line, dropped_line
from db.models.inbox import TelegramUpdate
from db.models.resume import TurnResume
from tests.conftest import make_settings, pg_only, sqlite_only
from tests.e2e.conftest import ALLOWED, OWNER, TG
from tests.fakes.openai_server import Calls, Error, FakeOpenAI, KeepAlive, Text
from tests.fakes.telegram_server import FakeTelegram
from tools.reminders.models import ScheduledJob

REMIND = {"action": "create", "text": "call mum", "when": "in 2 hours"}


async def jobs(tg: TG) -> int:
    """Reminders the user has: one per `schedule` call that ran."""
    async with tg.app.session_factory() as s:
        return int((await s.execute(select(func.count()).select_from(ScheduledJob))).scalar())


def streaming(tg: TG, text: str) -> bool:
    """Whether a draft of the answer `text` begins reached Telegram: that answer's turn runs
    (a draft of an earlier answer says nothing about it)."""
    return any(str(d.params.get("text") or "").startswith(text) for d in tg.server.drafts)


async def continue_now(tg: TG) -> int:
    found = await continue_cut_turns(tg.runtime, tg.app.deps.clock())
    await tg.idle()
    return found


# On PostgreSQL the stop sometimes cuts the model's stream (an error the error line reports,
# which settles the message) before it cancels the turn: then the user heard once already.
@sqlite_only
async def test_a_message_cut_by_a_stop_is_continued_once_at_start(tg: TG) -> None:
    await tg.send(OWNER, "an answered one")
    assert (await tg.reply(OWNER)).text == "echo: an answered one"
    tg.llm.add(Text("x" * 400, chunk=1, delay=0.05))  # far beyond the grace period
    await tg.send(OWNER, "the question cut off by the stop")
    # Its own answer streams: under load the answer above may have left a draft too.
    await tg.server.wait_for(lambda: streaming(tg, "x"))
    await tg.stop(grace=0.2)
    await tg.start()
    tg.llm.add(Text("the whole answer"))
    assert await continue_now(tg) == 1
    texts = [m.text for m in await tg.replies(OWNER, 2)]
    assert texts == [
        "I was restarted while answering “the question cut off by the stop”; continuing.",
        "the whole answer",
    ]
    # A second start finds nothing: answered messages are never taken up.
    assert await continue_now(tg) == 0
    assert tg.unread(OWNER) == []


async def test_a_turn_cut_after_a_tool_round_goes_on_from_its_record(tg: TG) -> None:
    # The model asks for a reminder; the call runs and is recorded; the next model call
    # hangs, and the stop cuts the turn there.
    tg.llm.add(Calls([("schedule", REMIND)]), KeepAlive())
    await tg.send(OWNER, "remind me to call mum in 2 hours")
    await tg.server.wait_for(lambda: len(tg.llm.requests) == 2)
    await tg.stop(grace=0.2)
    await tg.start()
    assert await jobs(tg) == 1
    tg.llm.add(Text("Done: I'll remind you in 2 hours."))
    assert await continue_now(tg) == 1
    texts = [m.text for m in await tg.replies(OWNER, 2)]
    assert texts == [
        continuing_line("remind me to call mum in 2 hours"),
        "Done: I'll remind you in 2 hours.",
    ]
    assert await jobs(tg) == 1  # the recorded call was not run again
    # The model went on from the record: the call and its result, not a fresh start.
    last = tg.llm.requests[-1]["messages"]
    calls = [m for m in last if m["role"] == "assistant" and m.get("tool_calls")]
    assert [json.loads(c["tool_calls"][0]["function"]["arguments"]) for c in calls] == [REMIND]
    assert last[-1]["role"] == "tool" and "Scheduled reminder" in last[-1]["content"]
    assert await continue_now(tg) == 0


@sqlite_only  # (the stop's cut, as in the first test)
async def test_a_clean_stop_during_a_continuation_is_not_counted_as_a_crash(tg: TG) -> None:
    tg.llm.add(Text("x" * 400, chunk=1, delay=0.05))
    await tg.send(OWNER, "cut once")
    await tg.server.wait_for(lambda: streaming(tg, "x"))
    await tg.stop(grace=0.2)
    await tg.start()
    tg.llm.add(Text("y" * 400, chunk=1, delay=0.05))
    assert await continue_cut_turns(tg.runtime, tg.app.deps.clock()) == 1
    await tg.server.wait_for(lambda: streaming(tg, "y"))
    await tg.stop(grace=0.2)  # SIGTERM's way: the continuation is cancelled, not killed
    await tg.start()
    tg.llm.add(Text("the answer after all"))
    assert await continue_now(tg) == 1
    texts = [m.text for m in await tg.replies(OWNER, 3)]
    assert texts == [continuing_line("cut once")] * 2 + ["the answer after all"]


async def test_a_message_older_than_the_window_is_left_alone(tg: TG) -> None:
    tg.llm.add(Calls([("schedule", REMIND)]), KeepAlive())
    await tg.send(OWNER, "remind me to call mum in 2 hours")
    await tg.server.wait_for(lambda: len(tg.llm.requests) == 2)
    await tg.stop(grace=0.2)
    await tg.start()
    later = tg.app.deps.clock() + RESTART_WINDOW + timedelta(minutes=1)
    assert await continue_cut_turns(tg.runtime, later) == 0
    await tg.idle()
    assert tg.server.sent_to(OWNER) == [] and len(tg.llm.requests) == 2


async def test_a_failed_turn_told_by_the_error_line_is_not_taken_up_again(tg: TG) -> None:
    tg.llm.add(Error(400, "refused"))  # the message is stored, then the model call fails
    await tg.send(OWNER, "this one fails")
    assert (await tg.reply(OWNER)).text.startswith("The model provider rejected")
    await tg.idle()
    assert await continue_now(tg) == 0


async def test_a_cut_turn_goes_before_the_chat_s_newer_message(tg: TG) -> None:
    tg.llm.add(Calls([("schedule", REMIND)]), KeepAlive())
    await tg.send(OWNER, "remind me to call mum in 2 hours")
    await tg.server.wait_for(lambda: len(tg.llm.requests) == 2)
    await tg.stop(grace=0.2)
    await tg.start()
    tg.llm.add(Text("reminder set", chunk=1, delay=0.01))
    found = asyncio.create_task(continue_cut_turns(tg.runtime, tg.app.deps.clock()))
    assert await found == 1
    await tg.send(OWNER, "and a newer message")  # polls while the cut turn goes on
    texts = [m.text for m in await tg.replies(OWNER, 3)]
    assert texts[1:] == ["reminder set", "echo: and a newer message"]


async def queue_behind_a_cut_turn(tg: TG) -> None:
    """A turn the stop cuts, and two messages that waited for it: stored, never handled."""
    tg.llm.add(KeepAlive())
    await tg.send(OWNER, "first")
    await tg.server.wait_for(lambda: len(tg.llm.requests) == 1)
    await tg.send(OWNER, "second")
    await tg.send(OWNER, "third")
    await tg.server.wait_for(tg.server.all_confirmed)
    async with asyncio.timeout(60):  # stored by the handler tasks, just after the fetch
        while True:
            if await stored(tg) >= 3:
                break
            await asyncio.sleep(0.05)
    await tg.stop(grace=0.2)
    await tg.start()


async def stored(tg: TG) -> int:
    async with tg.app.session_factory() as s:
        return int((await s.execute(select(func.count()).select_from(TelegramUpdate))).scalar())


WAITED = [continuing_line("first"), "answer one", "echo: second", "echo: third"]


async def test_messages_waiting_behind_a_cut_turn_are_answered_after_it(tg: TG) -> None:
    await queue_behind_a_cut_turn(tg)
    tg.llm.add(Text("answer one"))
    assert await continue_now(tg) == 1
    assert [m.text for m in await tg.replies(OWNER, 4)] == WAITED
    assert await continue_now(tg) == 0  # handled: never again
    assert tg.unread(OWNER) == []


async def test_a_waiting_message_whose_replay_was_cut_is_not_tried_again(tg: TG) -> None:
    await queue_behind_a_cut_turn(tg)
    async with tg.app.session_factory() as s, s.begin():  # as if a replay had been killed
        await s.execute(
            update(TelegramUpdate).where(TelegramUpdate.done.is_(False)).values(replays=1)
        )
    tg.llm.add(Text("answer one"))
    assert await continue_now(tg) == 1
    texts = [m.text for m in await tg.replies(OWNER, 4)]
    assert texts == [
        continuing_line("first"),
        "answer one",
        dropped_line("second"),
        dropped_line("third"),
    ]
    assert len(tg.llm.requests) == 2  # the first message, then its continuation


@pytest.fixture
async def two_workers(
    tmp_path: Path, fake_llm: FakeOpenAI, telegram_server: FakeTelegram
) -> AsyncIterator[list[Runtime]]:
    settings = make_settings(
        tmp_path, fake_llm,
        telegram_bot_token=telegram_server.token, telegram_api_url=telegram_server.base_url,
        allowed_user_ids=",".join(map(str, ALLOWED)),
    )  # fmt: skip
    rts = []
    for _ in range(2):
        llm = LLMClient(settings, retry_base_delay=0.01, retry_max_delay=0.05)
        rts.append(build_runtime(await build_app(settings, llm=llm)))
    yield rts
    for rt in rts:
        await rt.shutdown(2.0)


@pg_only
async def test_two_workers_starting_together_continue_a_cut_turn_once(
    tg: TG, two_workers: list[Runtime]
) -> None:
    tg.llm.add(Calls([("schedule", REMIND)]), KeepAlive())
    await tg.send(OWNER, "remind me to call mum in 2 hours")
    await tg.server.wait_for(lambda: len(tg.llm.requests) == 2)
    await tg.stop(grace=0.2)
    tg.llm.add(Text("reminder set", chunk=3, delay=0.01))
    a, b = two_workers
    now = a.app.deps.clock()
    assert await asyncio.gather(continue_cut_turns(a, now), continue_cut_turns(b, now)) == [1, 1]
    for rt in two_workers:
        await asyncio.wait_for(rt.inflight.wait_idle(), 60)
    texts = [m.text for m in tg.server.sent_to(OWNER)]
    assert texts == [continuing_line("remind me to call mum in 2 hours"), "reminder set"]
    assert len(tg.llm.requests) == 3  # one continuation asked the model, once
    async with a.app.session_factory() as s:
        row = (await s.execute(select(TurnResume))).scalar_one()
    assert (row.attempts, row.given_up_at) == (1, None)


@pg_only
async def test_two_workers_starting_together_answer_waiting_messages_once(
    tg: TG, two_workers: list[Runtime]
) -> None:
    await queue_behind_a_cut_turn(tg)
    await tg.stop(grace=0.2)
    tg.llm.add(Text("answer one"))
    a, b = two_workers
    now = a.app.deps.clock()
    await asyncio.gather(continue_cut_turns(a, now), continue_cut_turns(b, now))
    for rt in two_workers:
        await asyncio.wait_for(rt.inflight.wait_idle(), 60)
    assert [m.text for m in tg.server.sent_to(OWNER)] == WAITED
