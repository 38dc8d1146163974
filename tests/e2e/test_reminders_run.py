"""`sidekick run` delivers a reminder that came due while it was down, right at startup."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

from db.engine import create_engine, session_factory
from db.migrate import upgrade
from db.repos import core as core_repo
from tests.e2e.conftest import OWNER
from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram
from tools.reminders import jobs
from tools.reminders.times import Spec, local_text


async def test_sidekick_run_delivers_a_missed_reminder_at_startup(
    tmp_path: Path, fake_llm: FakeOpenAI, telegram_server: FakeTelegram
) -> None:
    server = telegram_server
    data = tmp_path / "data"
    # The database the bot will open: its file in DATA_DIR, or the server under make test-pg.
    sqlite = f"sqlite+aiosqlite:///{data / 'sidekick.db'}"
    engine = create_engine(os.environ.get("DATABASE_URL") or sqlite)
    await upgrade(engine)
    now = datetime.now(UTC).replace(microsecond=0)
    async with session_factory(engine)() as s, s.begin():
        user = await core_repo.get_or_create_user(s, OWNER, "Owner", now)
    due = now - timedelta(hours=1)
    spec = Spec("at", ZoneInfo("UTC"), first=due)
    await jobs.create(session_factory(engine), user_id=user.id, kind="reminder",
                      text="renew the passport", words="", spec=spec, now=due)  # fmt: skip
    await engine.dispose()
    env = {
        **os.environ,
        "TELEGRAM_BOT_TOKEN": server.token,
        "TELEGRAM_API_URL": server.base_url,
        "ALLOWED_USER_IDS": str(OWNER),
        "LLM_BASE_URL": fake_llm.base_url,
        "LLM_API_KEY": "sk-test-secret-key-123456",
        "LLM_MODEL": "fake-model",
        "DATA_DIR": str(data),
    }
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", cwd=tmp_path, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        await server.wait_for(lambda: len(server.sent_to(OWNER)) >= 1, timeout=60)
        proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(proc.communicate(), 30)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode == 0, err.decode()
    [sent] = server.sent_to(OWNER)
    # "HH:MM", or with the date when the start happens to fall on the next day (UTC).
    assert sent.text == f"⏰ renew the passport\n(late: was due {local_text(due, UTC, now)})"
    assert "reminders: 1 claimed" in err.decode() and "1 sent" in err.decode()
    assert fake_llm.requests == []  # a reminder never calls the model
