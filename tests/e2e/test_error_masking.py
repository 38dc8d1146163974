"""A provider error text that echoes the request's headers (the API key) is masked the same
way on every path that shows or keeps it: the chat reply, a scheduled task's failure
notice, the run ledger and `/reminders history`, the code jobs table."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from sqlalchemy import select

from tests.e2e.conftest import OWNER, TG
from tests.e2e.reminders_env import make_env
from tests.fakes.openai_server import Calls, Error, Text
from tools.code.models import CodeJob
from tools.errors import ProviderError, public_text

BERLIN = "Europe/Berlin"
FRIDAY = datetime(2026, 11, 20, 5, 0, tzinfo=UTC)
KEY = "sk-test-secret-key-123456"  # tests/conftest.py make_settings' LLM_API_KEY
ECHO = f"bad request; you sent Authorization: Bearer {KEY}"
MASKED = "The model provider rejected the request (HTTP 400)."


def clean(text: str | None) -> bool:
    return text is not None and KEY not in text and "Bearer" not in text


def test_the_one_masking_function_keeps_only_the_status() -> None:
    assert public_text(ProviderError(f"HTTP 400: {ECHO}", 400)) == MASKED
    assert clean(public_text(ProviderError(f"HTTP 502: {ECHO}", 502)))
    assert clean(public_text(RuntimeError(ECHO)))


async def test_chat_reply_is_masked(tg: TG) -> None:
    tg.llm.add(Error(400, ECHO))
    await tg.send(OWNER, "hello")
    reply = await tg.reply(OWNER)
    assert reply.text == MASKED


async def test_scheduled_task_notice_ledger_and_history_are_masked(tg: TG) -> None:
    env = make_env(tg, FRIDAY)
    user = await env.user(OWNER, BERLIN)
    job = await env.job(user, BERLIN, "the weather", kind="task", daily_at="07:00")
    tg.llm.add(Error(400, ECHO))
    [notice] = await env.tick_at(datetime(2026, 11, 20, 6, 0, tzinfo=UTC))
    assert clean(notice) and MASKED.rstrip(".") in notice
    [run] = await env.runs(job.id)
    assert run.status == "failed" and clean(run.error) and run.error == MASKED
    await tg.send(OWNER, "/reminders history")
    history = (await tg.reply(OWNER)).text
    assert f"#{job.id}" in history and clean(history)


async def test_code_job_error_is_masked(tg: TG) -> None:
    # The model asks for code; the code model call fails with the echoed header.
    tg.llm.add(
        Calls([("code", {"action": "generate", "task": "sum 1..10"})]),
        Error(400, ECHO),
        Text("started"),
    )
    await tg.send(OWNER, "write me code")
    await tg.reply(OWNER)
    for _ in range(400):
        async with tg.app.session_factory() as s:
            job = (await s.execute(select(CodeJob))).scalar_one_or_none()
        if job is not None and job.status != "pending":
            break
        await asyncio.sleep(0.05)
    assert job is not None and job.status == "failed"
    assert clean(job.error) and job.error == MASKED
