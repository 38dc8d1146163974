"""kill -9 at points of a turn, with a real `sidekick run` process on the fake Telegram and
the fake model; the next start continues the turn (bot/telegram/resume.py): one line that it
continues, then the answer, once, and a tool call the turn recorded is not run again. A turn
cut twice is not tried a third time: one line tells the user. Messages that waited behind
the cut turn are answered after it, once, in order (the inbox: bot/telegram/middlewares.py). Runs on
PostgreSQL too (the child gets DATABASE_URL under `make test-pg`)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, select

from bot.agent.toolexec import CUT_TEXT
from bot.llm.client import STILL_WAITING
from bot.telegram.resume import continuing_line, given_up_line
from db.engine import create_engine, session_factory
from db.models.inbox import TelegramUpdate
from db.models.resume import RoundInFlight
from tests.conftest import make_settings
from tests.e2e.conftest import OWNER
from tests.fakes.openai_server import Calls, FakeOpenAI, KeepAlive, Text
from tests.fakes.telegram_server import FakeTelegram, message_update
from tests.polling import until
from tools.code.models import CodeExecution
from tools.reminders.models import ScheduledJob

REMIND = {"action": "create", "text": "call mum", "when": "in 2 hours"}
ASK = "remind me to call mum in 2 hours"
WAIT_S = 120.0  # a start of the whole app on a loaded machine takes seconds; this bounds a hang
# Each test starts `sidekick run` two or three times (each start is seconds of CPU: imports,
# migrations) and may wait out a stop's grace: on a loaded machine that adds up past
# pytest's default bound for a whole test; WAIT_S still bounds each wait.
pytestmark = pytest.mark.timeout(600)


@dataclass
class Sidekick:
    """`sidekick run` (python -m bot) on one DATA_DIR, started again after each kill."""

    tmp_path: Path
    env: dict[str, str]
    runs: list[Path] = field(default_factory=list)
    proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        log = self.tmp_path / f"run{len(self.runs) + 1}.log"
        self.runs.append(log)
        with log.open("wb") as out:  # a file, not a pipe nobody reads while it runs
            self.proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "bot", cwd=self.tmp_path, env=self.env,
                stdout=asyncio.subprocess.DEVNULL, stderr=out,
            )  # fmt: skip

    async def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        await self.proc.wait()

    async def stop(self) -> str:
        """SIGTERM and wait for the exit; the run's log."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(self.proc.wait(), WAIT_S) == 0, self.log()
        return self.log()

    def log(self) -> str:
        return self.runs[-1].read_text(errors="replace")


@pytest.fixture
async def sidekick(
    tmp_path: Path, fake_llm: FakeOpenAI, telegram_server: FakeTelegram
) -> AsyncIterator[Sidekick]:
    env = {
        **os.environ,
        "TELEGRAM_BOT_TOKEN": telegram_server.token,
        "TELEGRAM_API_URL": telegram_server.base_url,
        "ALLOWED_USER_IDS": str(OWNER),
        "LLM_BASE_URL": fake_llm.base_url,
        "LLM_API_KEY": "sk-test-secret-key-123456",
        "LLM_MODEL": "fake-model",
        "DATA_DIR": str(tmp_path / "data"),
    }
    bot = Sidekick(tmp_path, env)
    yield bot
    if bot.proc is not None and bot.proc.returncode is None:
        await bot.kill()


async def rows(tmp_path: Path, fake_llm: FakeOpenAI, model: type[Any]) -> int:
    engine = create_engine(make_settings(tmp_path, fake_llm).db_url)
    try:
        async with session_factory(engine)() as s:
            return int((await s.execute(select(func.count()).select_from(model))).scalar())
    finally:
        await engine.dispose()


async def stored_updates(tmp_path: Path, fake_llm: FakeOpenAI, want: int) -> None:
    """Wait until the running bot has stored `want` updates: Telegram forgets one as soon as
    polling fetched it, before the bot's write can land."""
    engine = create_engine(make_settings(tmp_path, fake_llm).db_url)
    count = select(func.count()).select_from(TelegramUpdate)
    try:
        async with asyncio.timeout(WAIT_S):
            while True:
                async with session_factory(engine)() as s:
                    if int((await s.execute(count)).scalar()) >= want:
                        return
                await asyncio.sleep(0.1)
    finally:
        await engine.dispose()


def texts(server: FakeTelegram) -> list[str | None]:
    return [m.text for m in server.sent_to(OWNER)]


async def test_kill_after_a_recorded_tool_round_continues_without_running_it_again(
    sidekick: Sidekick, tmp_path: Path, fake_llm: FakeOpenAI, telegram_server: FakeTelegram
) -> None:
    server, llm = telegram_server, fake_llm
    # The reminder is set and the round recorded; the final model call never answers.
    llm.add(Calls([("schedule", REMIND)]), KeepAlive())
    await sidekick.start()
    await server.push(message_update(OWNER, ASK, message_id=1))
    await server.wait_for(lambda: len(llm.requests) == 2, WAIT_S)
    await sidekick.kill()
    assert texts(server) == []
    llm.add(Text("Done: I'll remind you to call mum at 14:00."))
    await sidekick.start()
    await server.wait_for(lambda: len(server.sent_to(OWNER)) >= 2, WAIT_S)
    log = await sidekick.stop()
    assert texts(server) == [continuing_line(ASK), "Done: I'll remind you to call mum at 14:00."]
    assert await rows(tmp_path, llm, ScheduledJob) == 1  # the recorded call did not run again
    assert len(llm.requests) == 3  # the continuation asked the model once, from the record
    resumed = llm.requests[-1]["messages"]
    assert resumed[-1]["role"] == "tool" and "Scheduled reminder" in resumed[-1]["content"]
    assert "Traceback" not in log


async def test_kill_while_a_writing_call_runs_reports_it_instead_of_running_it_again(
    sidekick: Sidekick, tmp_path: Path, fake_llm: FakeOpenAI, telegram_server: FakeTelegram
) -> None:
    """Issue 45 item 7: code (a writing call) is running when the process is killed -9; the
    next start does not run it again (it may have done its work) but tells the model and
    the person that it may or may not have finished."""
    server, llm = telegram_server, fake_llm
    slow = "await new Promise((r) => setTimeout(r, 60000)); console.log('sent the invoices')"
    llm.add(Calls([("code", {"action": "execute", "code": slow, "timeout_ms": 90000})]))
    await sidekick.start()
    await server.push(message_update(OWNER, "send the invoices with code", message_id=1))

    async def in_flight() -> bool:  # kept before the call runs: the run is under way
        return await rows(tmp_path, llm, RoundInFlight) > 0

    # The model was asked: the child's database is migrated (PostgreSQL's takes a while).
    await server.wait_for(lambda: len(llm.requests) >= 1, WAIT_S)
    await until(in_flight, "the writing round kept", WAIT_S)
    await sidekick.kill()
    llm.add(Text("The invoices may not have gone out; please check."))
    await sidekick.start()
    await server.wait_for(lambda: len(server.sent_to(OWNER)) >= 2, WAIT_S)
    log = await sidekick.stop()
    continuing, answer = texts(server)
    assert continuing == continuing_line("send the invoices with code")
    assert answer is not None and answer.startswith("The invoices may not have gone out")
    assert "I was restarted while running code; it may or may not have finished." in answer
    assert len(llm.requests) == 2
    resumed = llm.requests[-1]["messages"]
    assert resumed[-1]["role"] == "tool" and resumed[-1]["content"] == CUT_TEXT
    assert await rows(tmp_path, llm, CodeExecution) == 0  # no second run was traced
    assert "Traceback" not in log


async def test_kill_mid_answer_continues_with_one_answer(
    sidekick: Sidekick, fake_llm: FakeOpenAI, telegram_server: FakeTelegram
) -> None:
    server, llm = telegram_server, fake_llm
    llm.add(Text("x" * 400, chunk=1, delay=0.05))  # streams for ~20 s
    await sidekick.start()
    await server.push(message_update(OWNER, "a long question", message_id=1))
    await server.wait_for(lambda: bool(server.drafts), WAIT_S)  # the answer is streaming
    await sidekick.kill()
    llm.add(Text("the whole answer"))
    await sidekick.start()
    await server.wait_for(lambda: len(server.sent_to(OWNER)) >= 2, WAIT_S)
    await sidekick.stop()
    assert texts(server) == [continuing_line("a long question"), "the whole answer"]
    assert len(llm.requests) == 2


async def test_a_turn_cut_twice_is_not_tried_a_third_time(
    sidekick: Sidekick, fake_llm: FakeOpenAI, telegram_server: FakeTelegram
) -> None:
    server, llm = telegram_server, fake_llm
    llm.add(Text("x" * 400, chunk=1, delay=0.05), Text("y" * 400, chunk=1, delay=0.05))
    await sidekick.start()
    await server.push(message_update(OWNER, "the question that kills", message_id=1))
    await server.wait_for(lambda: bool(server.drafts), WAIT_S)
    await sidekick.kill()  # first crash: in its first run
    drafts = len(server.drafts)
    await sidekick.start()
    await server.wait_for(lambda: len(server.drafts) > drafts and len(llm.requests) == 2, WAIT_S)
    await sidekick.kill()  # second crash: in its continuation
    assert texts(server) == [continuing_line("the question that kills")]
    await sidekick.start()
    await server.wait_for(lambda: len(server.sent_to(OWNER)) >= 2, WAIT_S)
    log = await sidekick.stop()
    assert texts(server) == [
        continuing_line("the question that kills"),
        given_up_line("the question that kills"),
    ]
    assert len(llm.requests) == 2  # no third run
    assert "the bot stopped 2 times while answering it" in log


def answers(server: FakeTelegram) -> list[str | None]:
    """What the user got, but the line that the stuck model call is still waited for (the
    machine is loaded: the wait may outlast its ~20 s)."""
    return [t for t in texts(server) if t != STILL_WAITING]


def asked(llm: FakeOpenAI) -> list[str]:
    """The user's message each model call answered, in order."""
    last = [r["messages"][-1] for r in llm.requests]
    # The text after a context block, whichever way the prompt put one in front.
    return [m["content"].rsplit("[/context]\n\n", 1)[-1] for m in last if m["role"] == "user"]


async def queue_behind_a_stuck_turn(
    sidekick: Sidekick, tmp_path: Path, llm: FakeOpenAI, server: FakeTelegram
) -> None:
    """A first message whose turn never gets an answer, two more sent to the chat while it
    runs: they wait for its turn, fetched from Telegram already."""
    llm.add(KeepAlive())
    await sidekick.start()
    await server.push(message_update(OWNER, "first", message_id=1))
    await server.wait_for(lambda: len(llm.requests) == 1, WAIT_S)  # its turn runs
    await server.push(message_update(OWNER, "second", message_id=2))
    await server.push(message_update(OWNER, "third", message_id=3))
    await server.wait_for(server.all_confirmed, WAIT_S)
    await stored_updates(tmp_path, llm, 3)


async def test_kill_while_messages_wait_answers_each_once_in_order(
    sidekick: Sidekick, tmp_path: Path, fake_llm: FakeOpenAI, telegram_server: FakeTelegram
) -> None:
    server, llm = telegram_server, fake_llm
    await queue_behind_a_stuck_turn(sidekick, tmp_path, llm, server)
    await sidekick.kill()
    assert answers(server) == []
    llm.add(Text("answer one"), Text("answer two"), Text("answer three"))
    await sidekick.start()
    await server.wait_for(lambda: len(answers(server)) >= 4, WAIT_S)
    log = await sidekick.stop()
    assert answers(server) == [continuing_line("first"), "answer one", "answer two", "answer three"]
    assert asked(llm) == ["first", "first", "second", "third"]
    assert "Traceback" not in log


async def test_a_clean_stop_while_messages_wait_doubles_nothing(
    sidekick: Sidekick, tmp_path: Path, fake_llm: FakeOpenAI, telegram_server: FakeTelegram
) -> None:
    server, llm = telegram_server, fake_llm
    await queue_behind_a_stuck_turn(sidekick, tmp_path, llm, server)
    log = await sidekick.stop()  # the grace runs out: the turn and the waiting two are cut
    assert "cancelled" in log
    llm.add(Text("answer one"), Text("answer two"), Text("answer three"))
    await sidekick.start()
    await server.wait_for(lambda: len(answers(server)) >= 4, WAIT_S)
    await sidekick.stop()  # all answered: the next start has nothing to take up
    llm.add(Text("answer four"))
    await sidekick.start()
    await server.push(message_update(OWNER, "fourth", message_id=5))
    await server.wait_for(lambda: len(answers(server)) >= 5, WAIT_S)
    log = await sidekick.stop()
    assert answers(server) == [
        continuing_line("first"), "answer one", "answer two", "answer three", "answer four",
    ]  # fmt: skip
    assert asked(llm) == ["first", "first", "second", "third", "fourth"]
    assert "left waiting by a stop" not in log and "without an answer" not in log
