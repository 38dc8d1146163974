"""Usage, cost, budgets and the fallback model, through the real agent, SQLite and the
model client (bot/llm) against the fake OpenAI server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from bot.agent.runner import Incoming
from bot.app import App, build_app
from bot.config import Settings
from bot.errors import ConfigError
from bot.llm.client import LLMClient
from bot.usage.meter import METER
from bot.usage.models import ModelUsage
from bot.usage.report import usage_text
from bot.usage.settings import PriceTable, parse_prices
from db.models import User
from tests.conftest import make_settings
from tests.fakes.openai_server import Calls, FakeOpenAI, Text
from tests.sessions_env import FakeClock
from tools.model_call import ModelCall

NOON = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
PRICED = "fake-model=1/2/0.5, backup-model=10/20"  # USD per 1M in / out / cached


def usage(prompt: int, completion: int, cached: int = 0, reasoning: int = 0) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
        "completion_tokens_details": {"reasoning_tokens": reasoning},
    }


async def start(settings: Settings, clock: FakeClock | None = None) -> App:
    llm = LLMClient(settings, retry_base_delay=0.001, retry_max_delay=0.002)
    return await build_app(settings, llm=llm, clock=clock or FakeClock(NOON))


@pytest.fixture
async def clock() -> FakeClock:
    return FakeClock(NOON)


@pytest.fixture
async def priced(tmp_path: Path, fake_llm: FakeOpenAI, clock: FakeClock) -> AsyncIterator[App]:
    app = await start(make_settings(tmp_path, fake_llm, prices=PRICED), clock)
    yield app
    await app.close()


async def rows(app: App) -> list[ModelUsage]:
    async with app.session_factory() as s:
        return list((await s.execute(select(ModelUsage).order_by(ModelUsage.id))).scalars())


def ask(text: str, user: int = 42) -> Incoming:
    return Incoming(text, telegram_user_id=user, user_name="Ann")


# -- recording -----------------------------------------------------------------------


@pytest.mark.db
async def test_provider_usage_is_recorded_with_its_cost(priced: App, fake_llm: FakeOpenAI) -> None:
    fake_llm.add(
        Calls([("memory", {"action": "list"})], usage=usage(1000, 100, cached=200)),
        Text("done", usage=usage(1500, 500, cached=1000, reasoning=300)),
    )
    reply = await priced.agent.handle(ask("what do you know about me?"))
    assert reply.text == "done"
    assert all(r["stream_options"] == {"include_usage": True} for r in fake_llm.requests)
    first, second = await rows(priced)
    assert (first.prompt_tokens, first.completion_tokens, first.cached_tokens) == (1000, 100, 200)
    assert (second.cached_tokens, second.reasoning_tokens) == (1000, 300)
    assert not first.estimated and first.purpose == "chat" and first.model == "fake-model"
    assert first.request_id == second.request_id == reply.request_id
    assert first.session_id == reply.session_id and first.user_id is not None
    assert first.provider_id and first.provider_id.startswith("chatcmpl-")
    # 800 in at $1 + 200 cached at $0.50 + 100 out at $2 (per 1M tokens)
    assert first.cost_usd == pytest.approx((800 * 1 + 200 * 0.5 + 100 * 2) / 1e6)
    assert second.cost_usd == pytest.approx((500 * 1 + 1000 * 0.5 + 500 * 2) / 1e6)


@pytest.mark.db
async def test_without_provider_usage_the_tokens_are_estimated(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    fake_llm.send_usage = False
    app = await start(make_settings(tmp_path, fake_llm, prices=PRICED))
    try:
        await app.agent.handle(ask("a question " * 50))
        (row,) = await rows(app)
        # The system prompt, the question and the tool schemas: well over 500 tokens.
        assert row.estimated and row.prompt_tokens > 500 and row.completion_tokens > 50
        assert row.cost_usd == pytest.approx(
            (row.prompt_tokens * 1 + row.completion_tokens * 2) / 1e6
        )
        text = await usage_text(app.part(METER), row.user_id)
        assert "1 estimated (no usage from the provider)" in text
    finally:
        await app.close()


async def test_a_model_without_a_price_counts_tokens_only(app: App, fake_llm: FakeOpenAI) -> None:
    fake_llm.add(Text("hi", usage=usage(100, 10)))
    await app.agent.handle(ask("hello"))
    (row,) = await rows(app)
    assert row.cost_usd is None and row.prompt_tokens == 100
    text = await usage_text(app.part(METER), row.user_id)
    assert "100 tokens in · 10 out · price unknown (tokens only)" in text
    assert "$" not in text


@pytest.mark.db
async def test_usage_report_by_model_and_purpose_per_user(
    priced: App, fake_llm: FakeOpenAI, clock: FakeClock
) -> None:
    fake_llm.add(Text("a", usage=usage(1000, 100)), Text("b", usage=usage(3000, 300)))
    await priced.agent.handle(ask("one", user=1))
    reply = await priced.agent.handle(ask("two", user=2))
    # A code generation for user 2, through the model tools get (ToolDeps.llm).
    fake_llm.add(Text("```ts\nconsole.log(1)\n```", usage=usage(200, 20)))
    async with priced.session_factory() as s:
        u2 = (await s.execute(select(User).where(User.telegram_id == 2))).scalar_one()
    call = ModelCall("code", u2.id, reply.session_id, reply.request_id)
    await priced.deps.llm.complete_text([{"role": "user", "content": "x"}], call=call)
    meter = priced.part(METER)
    assert meter is not None
    text = await usage_text(meter, u2.id)
    assert text.startswith("Today (2026-11-23, UTC): 2 calls · 3,200 tokens in · 320 out")
    assert "  chat — 1 call · 3,000 tokens in · 300 out · $0.0036" in text
    assert "  code generation — 1 call · 200 tokens in · 20 out · $0.0002" in text
    assert "  fake-model — 2 calls" in text
    # The last chat request, by the provider's count (the code call is not a request).
    assert "the first model call sent 3,000 tokens (provider's count)" in text
    everyone = await usage_text(meter, None)
    assert "3 calls · 4,200 tokens in · 420 out" in everyone
    clock.advance(days=40)  # a new month: the figures start again
    assert "Today (2027-01-02, UTC): nothing yet" in await usage_text(meter, u2.id)


# -- prices --------------------------------------------------------------------------


def test_prices_parse_and_lookup(tmp_path: Path) -> None:
    table = PriceTable(parse_prices("my-model=1/2; other=0.5/1/0.1; gpt-4o-mini=0.15/0.6"))
    assert table.cost("my-model", 1_000_000, 1_000_000) == pytest.approx(3.0)
    assert table.cost("other", 1_000_000, 0, cached=1_000_000) == pytest.approx(0.1)
    # Found under a provider prefix or a dated snapshot name too.
    mini = table.lookup("gpt-4o-mini")
    assert mini is not None and mini.input == pytest.approx(0.15)
    assert table.lookup("gpt-4o-mini-2024-07-18") == mini == table.lookup("openai/gpt-4o-mini")
    # Only what PRICES names has a price: no table of our own to go stale.
    assert table.lookup("gpt-4o") is None and PriceTable.from_setting(None).lookup("gpt-4o") is None
    assert table.lookup("llama3.1") is None and table.cost("llama3.1", 10, 10) is None
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"local": {"input": 0, "output": 0}, "x": [1, 2, 0.5]}))
    from_file = PriceTable.from_setting(str(path))
    assert from_file.cost("local", 10**6, 10**6) == 0.0
    assert from_file.cost("x", 10**6, 0, cached=10**6) == pytest.approx(0.5)


@pytest.mark.parametrize(
    "value",
    ["model=1", "model=a/b", "=1/2", "model=-1/2", "/no/such/prices.json"],
)
def test_bad_prices_name_the_setting(tmp_path: Path, value: str) -> None:
    with pytest.raises(ConfigError, match=r"^PRICES: "):
        make_settings(tmp_path, None, prices=value)


# -- purposes, doctor, migration -------------------------------------------------------


@pytest.mark.db
async def test_archive_summaries_and_scheduled_tasks_are_recorded_by_purpose(
    priced: App, fake_llm: FakeOpenAI
) -> None:
    from bot.sessions.archive import Archiver
    from tools.memory.store import MEMORY

    fake_llm.add(Text("Sure, noted.", usage=usage(500, 50)))
    reply = await priced.agent.handle(ask("I am planning a trip to Lisbon in May"))
    fake_llm.add(Text("The reminder text", usage=usage(300, 30)))
    scheduled = Incoming("remind me", telegram_user_id=42, user_name="Ann", purpose="scheduled")
    await priced.agent.handle(scheduled)
    deps = priced.deps
    archiver = Archiver(
        deps.session_factory, priced.part(MEMORY), deps.llm, deps.clock, default_tz=deps.tz
    )
    summary = "The user plans a trip to Lisbon in May and asked Sidekick to note it."
    fake_llm.add(Text(summary, usage=usage(800, 40)))
    assert (await archiver.archive(reply.session_id)).status == "archived"
    chat, task, archive = await rows(priced)
    assert (chat.purpose, task.purpose, archive.purpose) == ("chat", "scheduled", "archive")
    assert archive.session_id == reply.session_id and archive.user_id == chat.user_id
    assert archive.request_id is None and archive.prompt_tokens == 800
    text = await usage_text(priced.part(METER), chat.user_id)
    assert "  archive summary — 1 call · 800 tokens in · 40 out" in text
    assert "  scheduled task — 1 call · 300 tokens in" in text


@pytest.mark.db
async def test_code_generation_is_recorded_for_the_request_that_started_it(
    priced: App, fake_llm: FakeOpenAI
) -> None:
    import asyncio

    def answer(body: dict[str, Any]) -> Text:
        if body.get("stream"):
            return Text("I started a job.")
        return Text("```ts\nconsole.log(1)\n```", usage=usage(300, 30))  # the job's call

    fake_llm.responder = answer
    fake_llm.add(Calls([("code", {"action": "generate", "task": "print 1"})]))
    reply = await priced.agent.handle(ask("write me a program"))
    jobs = [t for t in asyncio.all_tasks() if t.get_name().startswith("code-job-")]
    await asyncio.gather(*jobs)
    code = [r for r in await rows(priced) if r.purpose == "code"]
    assert len(code) == 1 and code[0].request_id == reply.request_id
    assert code[0].prompt_tokens == 300 and code[0].session_id == reply.session_id


@pytest.mark.db
async def test_doctor_shows_todays_spend_and_budget_state(
    tmp_path: Path, fake_llm: FakeOpenAI, clock: FakeClock
) -> None:
    from bot.usage.feature import FEATURE

    assert FEATURE.adds.doctor is not None
    settings = make_settings(
        tmp_path,
        fake_llm,
        prices="fake-model=1/2",
        budget_usd="0.001/day",
        llm_model="fake-model, llama3",
    )
    app = await start(settings, clock)
    try:
        fake_llm.add(Text("ok", usage=usage(1000, 100)))
        await app.agent.handle(ask("hello"))
        checks = {c.name: c for c in await FEATURE.adds.doctor(app)}
        assert checks["usage today"].detail == "1 call · 1,000 tokens in · 100 out · $0.0012"
        budget = checks["budget"]
        assert not budget.ok and "today $0.0012 of $0.001 (120%)" in budget.detail
        assert "used up" in budget.detail and "BUDGET_USD" in budget.fix
        prices = checks["prices"]
        assert not prices.ok and "price unknown for llama3" in prices.detail
    finally:
        await app.close()


async def test_migration_keeps_existing_users(tmp_path: Path) -> None:
    from alembic import command
    from sqlalchemy import text

    from db.engine import create_engine
    from db.migrate import alembic_config, upgrade

    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 'old.db'}")
    cfg = alembic_config()

    def to_0006(conn: Any) -> None:
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, "0006")

    async with engine.begin() as conn:
        await conn.run_sync(to_0006)
        await conn.execute(
            text("INSERT INTO users (telegram_id, name, created_at) VALUES (7, 'Old', '2026-1-1')")
        )
    await upgrade(engine)
    async with engine.connect() as conn:
        row = (
            await conn.execute(text("SELECT llm_model, usage_footer, usage_warned FROM users"))
        ).one()
        assert tuple(row) == (None, 0, None)
        assert (await conn.execute(text("SELECT count(*) FROM model_usage"))).scalar() == 0
    await engine.dispose()
