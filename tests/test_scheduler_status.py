"""What doctor reports about sessions: the split job, next split, what is due, what fails."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.app import App
from bot.sessions.doctor import session_checks
from tests.fakes.openai_server import Error, FakeOpenAI
from tests.sessions_env import make_env

pytestmark = pytest.mark.db  # every test here opens its own database


async def test_doctor_lists_jobs_next_split_and_failures(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    t0 = datetime(2026, 11, 20, 18, 0, tzinfo=UTC)
    async with make_env(
        tmp_path, fake_llm, t0, timezone="America/New_York", session_split="daily 04:30"
    ) as env:
        results = {r.name: r for r in await session_checks(env.settings, env.sf, t0)}
        assert results["job session-split"].ok
        assert "every 1 min" in results["job session-split"].detail
        assert "next split 2026-11-21 04:30 EST" in results["job session-split"].detail
        assert "0 open, 0 due" in results["sessions"].detail
        assert "session archiving" not in results

        await env.chat(1, "something", "ok")
        await env.chat(2, "other", "ok", timezone="Asia/Tokyo")
        later = datetime(2026, 11, 21, 9, 40, tzinfo=UTC)  # 04:40 New York, 18:40 Tokyo
        env.clock.now = later
        results = {r.name: r for r in await session_checks(env.settings, env.sf, later)}
        assert "2 open, 2 due for a split" in results["sessions"].detail
        assert "1 user(s) with their own time zone" in results["sessions"].detail

        fake_llm.responder = lambda body: Error(503)
        for _ in range(3):
            await env.jobs.split_sessions()
            env.clock.advance(hours=2)
        results = {r.name: r for r in await session_checks(env.settings, env.sf, env.clock())}
        failing = results["session archiving"]
        assert not failing.ok and "2 session(s) failed 3+ times" in failing.detail
        assert "ProviderError" in failing.detail and "LLM_" in failing.fix


async def test_doctor_with_splitting_off(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    t0 = datetime(2026, 11, 20, 18, 0, tzinfo=UTC)
    async with make_env(tmp_path, fake_llm, t0, session_split="none") as env:
        results = {r.name: r for r in await session_checks(env.settings, env.sf, t0)}
        assert "not split by time" in results["job session-split"].detail


async def test_doctor_runs_the_sessions_check(app: App) -> None:
    from bot.ops.doctor import all_checks, format_table

    [check] = [c for c in all_checks(app.features) if c.__name__ == "check_sessions"]
    results = await check(app)
    assert [r.name for r in results] == ["job session-split", "sessions", "session summaries"]
    table = format_table(results)
    assert "ok    job session-split  next run: at bot start, then every 1 min" in table
