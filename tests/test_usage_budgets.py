"""Budgets (refusal before any model call, the 80% warning once), the fallback model and
/model, through the real agent, SQLite and the model client against the fake OpenAI server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import select

from bot.app import App
from bot.llm import client as llm_client
from bot.terminal.commands import Who, run_command
from bot.usage.meter import METER
from db.models import User
from tests.conftest import make_settings
from tests.fakes.openai_server import Calls, Error, FakeOpenAI, Text
from tests.sessions_env import FakeClock
from tests.test_usage import PRICED, ask, clock, rows, start, usage
from tools.model_call import BudgetExceeded

pytestmark = pytest.mark.db  # every test here opens its own database

__all__ = ["clock"]  # the fixture, shared with tests/test_usage.py


# -- budgets -------------------------------------------------------------------------


async def test_daily_budget_refuses_without_a_model_call_until_the_next_day(
    tmp_path: Path, fake_llm: FakeOpenAI, clock: FakeClock
) -> None:
    settings = make_settings(tmp_path, fake_llm, prices=PRICED, budget_usd="0.01/day")
    app = await start(settings, clock)
    try:
        for n in range(3):  # 4000 tokens at $1 + 1000 at $2 = $0.006 each
            fake_llm.add(Text(f"answer {n}", usage=usage(4000, 1000)))
        assert (await app.agent.handle(ask("first"))).text.startswith("answer 0")
        second = await app.agent.handle(ask("second"))
        assert second.text.startswith("answer 1")  # $0.006 spent before: allowed
        calls = len(fake_llm.requests)
        refused = await app.agent.handle(ask("third"))
        assert len(fake_llm.requests) == calls, "no model call once the budget is used up"
        assert refused.text == (
            "Today's model budget of $0.01 is used up ($0.012 spent), so I can't ask the "
            "model; I'll answer again after midnight (UTC), or sooner if the owner raises "
            "BUDGET_USD."
        )
        # Archive summaries and code generation are refused too, without a call.
        with pytest.raises(BudgetExceeded):
            await app.deps.llm.complete_text([{"role": "user", "content": "x"}])
        assert len(fake_llm.requests) == calls
        # A restarted bot reads the day's spending back from the database.
        await app.close()
        app = await start(settings, clock)
        assert (await app.agent.handle(ask("again"))).text == refused.text
        clock.advance(hours=12)  # the next day
        assert (await app.agent.handle(ask("fourth"))).text.startswith("answer 2")
    finally:
        await app.close()


async def test_budget_is_checked_before_each_call_within_a_request(
    tmp_path: Path, fake_llm: FakeOpenAI, clock: FakeClock
) -> None:
    app = await start(make_settings(tmp_path, fake_llm, user_token_cap="1000/day"), clock)
    try:
        fake_llm.add(Calls([("memory", {"action": "list"})], usage=usage(900, 200)))
        reply = await app.agent.handle(ask("look it up"))
        assert len(fake_llm.requests) == 1 and reply.tool_calls == 1
        assert reply.text.startswith("You have used your 1,000 tokens for today")
        await app.agent.handle(ask("other user", user=43))  # caps are per user
        assert len(fake_llm.requests) == 2
    finally:
        await app.close()


async def test_warning_at_80_percent_once(
    tmp_path: Path, fake_llm: FakeOpenAI, clock: FakeClock
) -> None:
    settings = make_settings(tmp_path, fake_llm, user_token_cap="1000/day")
    app = await start(settings, clock)
    warning = "Heads-up: you have used 90% of your tokens for today (900 of 1,000)."
    try:
        texts = []
        for n in range(4):
            fake_llm.add(Text(f"answer {n}", usage=usage(200, 100)))
            texts.append((await app.agent.handle(ask(f"q{n}"))).text)
        assert texts[:2] == ["answer 0", "answer 1"]
        assert texts[2] == f"answer 2\n\nℹ️ {warning}"
        assert texts[3] == "answer 3"  # warned once, though still above 80%
        async with app.session_factory() as s:
            msgs = (await s.execute(select(User.usage_warned))).scalars().all()
        assert json.loads(msgs[0]) == {"user_day": "2026-11-23"}
        # The warning is not part of the stored answer the model sees later.
        assert warning not in json.dumps(fake_llm.requests[-1]["messages"])
    finally:
        await app.close()
    # After a restart the same period is not warned again; the next day is.
    app = await start(settings, clock)
    try:
        clock.advance(days=1)
        for n in range(3):
            fake_llm.add(Text(f"day 2 answer {n}", usage=usage(200, 100)))
            last = (await app.agent.handle(ask(f"d{n}"))).text
        assert last.endswith(warning)
    finally:
        await app.close()


# -- models --------------------------------------------------------------------------


async def test_fallback_model_answers_after_the_primarys_503s(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    backup = await FakeOpenAI().start()
    settings = make_settings(
        tmp_path,
        fake_llm,
        prices=PRICED,
        llm_fallback_model="backup-model",
        llm_fallback_base_url=backup.base_url,
    )
    app = await start(settings)
    try:
        fake_llm.add(*[Error(503)] * (llm_client.MAX_RETRIES + 1))
        backup.add(Text("from the backup", usage=usage(100, 10)))
        reply = await app.agent.handle(ask("hello"))
        assert len(fake_llm.requests) == llm_client.MAX_RETRIES + 1
        assert backup.requests[0]["model"] == "backup-model"
        assert reply.text == (
            "from the backup\n\nℹ️ fake-model is not answering (HTTP 503); "
            "this answer is from backup-model."
        )
        (row,) = await rows(app)
        assert row.model == "backup-model" and row.cost_usd == pytest.approx(
            (100 * 10 + 10 * 20) / 1e6
        )
        # A refusal (4xx) is not a failure the fallback is for.
        fake_llm.add(Error(400, "bad request"))
        with pytest.raises(Exception, match="HTTP 400"):
            await app.agent.handle(ask("again"))
        assert len(backup.requests) == 1
    finally:
        await app.close()
        await backup.stop()


async def test_user_model_is_sent_and_stays_after_restart(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    async def model_reply(app: App, args: str) -> str:  # /model, as user 42 types it
        reply = await run_command(app, Who(42, "Ann"), f"/model {args}".strip())
        assert reply is not None
        return reply

    settings = make_settings(tmp_path, fake_llm, llm_model="fake-model, big-model")
    app = await start(settings)
    try:
        assert "Your model: fake-model" in await model_reply(app, "")
        assert await model_reply(app, "BIG-model") == "Your model is now big-model."
        assert "I don't know the model 'gpt-9'" in await model_reply(app, "gpt-9")
    finally:
        await app.close()
    app = await start(settings)
    try:
        await app.agent.handle(ask("hi"))
        await app.agent.handle(ask("hi", user=43))
        assert [r["model"] for r in fake_llm.requests] == ["big-model", "fake-model"]
        assert "→ big-model" in await model_reply(app, "")
    finally:
        await app.close()
    # The owner drops the model from LLM_MODEL's list: back to the default, no error.
    app = await start(make_settings(tmp_path, fake_llm))
    try:
        await app.agent.handle(ask("hi"))
        assert fake_llm.requests[-1]["model"] == "fake-model"
    finally:
        await app.close()


async def test_spending_of_another_process_counts_within_a_minute(
    tmp_path: Path, fake_llm: FakeOpenAI, clock: FakeClock
) -> None:
    settings = make_settings(tmp_path, fake_llm, prices=PRICED, budget_usd="0.005/day")
    bot, chat = await start(settings, clock), await start(settings, clock)
    meter = bot.part(METER)
    assert meter is not None
    try:
        assert await meter.refusal(None) is None  # totals read now
        fake_llm.add(Text("costly", usage=usage(4000, 1000)))  # $0.006
        await chat.agent.handle(ask("from the terminal"))
        assert await meter.refusal(None) is None  # not re-read yet
        clock.advance(minutes=1)
        refusal = await meter.refusal(None)
        assert refusal is not None and refusal.startswith("Today's model budget")
    finally:
        await bot.close()
        await chat.close()


async def test_a_warning_past_the_cap_says_used_up_not_a_percentage(
    tmp_path: Path, fake_llm: FakeOpenAI, clock: FakeClock
) -> None:
    app = await start(make_settings(tmp_path, fake_llm, user_token_cap="1000/day"), clock)
    try:
        fake_llm.add(Text("long answer", usage=usage(2000, 500)))  # one call, 250% of the cap
        text = (await app.agent.handle(ask("q"))).text
        assert text == (
            "long answer\n\nℹ️ Heads-up: you have used up your tokens for today (2,500 of 1,000)."
        )
        assert "%" not in text
    finally:
        await app.close()
