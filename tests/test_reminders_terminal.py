"""Reminders in `sidekick chat`: made through the model in one session, delivered into the
terminal at the next start when their time came while the chat was closed; doctor counts them."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import select, update

from db.engine import create_engine, session_factory
from db.models.core import User
from tests.fakes.openai_server import Calls, FakeOpenAI, Text
from tests.test_terminal_chat import run_chat
from tools.reminders.models import JobRun, ScheduledJob

pytestmark = pytest.mark.db  # every test here opens its own database


async def test_a_reminder_made_in_the_terminal_arrives_at_the_next_start(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    args = {"action": "create", "text": "water the plants", "when": "tomorrow at 9",
            "at": "tomorrow 09:00"}  # fmt: skip
    fake_llm.add(Calls([("schedule", args)]), Text("I'll remind you."))
    code, out, err = await run_chat(tmp_path, fake_llm, "remind me tomorrow at 9 to water\n")
    assert code == 0, err
    assert "I'll remind you." in out and "⏰" not in out

    url = (
        os.environ.get("DATABASE_URL") or f"sqlite+aiosqlite:///{tmp_path / 'data' / 'sidekick.db'}"
    )
    engine = create_engine(url)  # the chat's own database (PostgreSQL under make test-pg)
    sf = session_factory(engine)
    async with sf() as s, s.begin():
        job = (await s.execute(select(ScheduledJob))).scalar_one()
        owner = await s.get(User, job.user_id)
        assert owner is not None and owner.telegram_id is None  # the local user
        # Its time came while the chat was closed.
        due = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=2)
        await s.execute(update(ScheduledJob).values(first_at=due, next_run_at=due))

    code, out, err = await run_chat(tmp_path, fake_llm, "/quit\n")
    assert code == 0, err
    assert "⏰ water the plants\n(late: was due " in out
    async with sf() as s:
        [run] = (await s.execute(select(JobRun))).scalars().all()
        assert (run.status, run.message_id) == ("sent", 1)
    await engine.dispose()

    code, out, err = await run_chat(tmp_path, fake_llm, "/quit\n")  # delivered once only
    assert code == 0, err
    assert "⏰" not in out
