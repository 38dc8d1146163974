"""/usage, /model and /context over the real Telegram adapter, and `sidekick usage`."""

from __future__ import annotations

import re
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

from tests.e2e.conftest import OWNER, TG
from tests.fakes.openai_server import Text
from tests.test_usage import usage

PRICES = "fake-model=1/2, big-model=10/20"

# The child runs this checkout's code, whatever the venv has installed.
ROOT = str(Path(__file__).resolve().parents[2])


async def test_usage_is_per_user_and_the_footer_is_optional(
    make_tg: Callable[..., Awaitable[TG]],
) -> None:
    tg = await make_tg(prices=PRICES, budget_usd="1/day", user_token_cap="100000/day")
    tg.llm.add(Text("first answer", usage=usage(1200, 300)))
    await tg.send(OWNER, "hello")
    assert (await tg.reply(OWNER)).text == "first answer"  # no footer by default
    await tg.send(OWNER, "/usage")
    chart, text = await tg.replies(OWNER, 2)
    assert chart.method == "sendPhoto"  # a day of spending: drawn above the text
    mine = text.text
    assert "1 call · 1,200 tokens in · 300 out · $0.0018" in mine
    assert "fake-model — 1 call" in mine and "chat — 1 call" in mine
    # Others' spending shows only as a share of the shared budget.
    assert "Shared budget today: 0% used" in mine
    assert "Your tokens today: 1,500 of 100,000 (2%)" in mine
    await tg.send(2001, "/usage")  # another user sees only their own
    theirs = (await tg.reply(2001)).text
    assert "Today (" in theirs and "nothing yet" in theirs and "1,200" not in theirs

    await tg.send(OWNER, "/usage footer on")
    assert "tokens and cost" in (await tg.reply(OWNER)).text
    tg.llm.add(Text("second answer", usage=usage(2000, 100)))
    await tg.send(OWNER, "again")
    assert (await tg.reply(OWNER)).text == (
        "second answer\n\n📊 2,000 tokens in · 100 out · $0.0022"
    )
    await tg.send(OWNER, "/usage session")
    session = (await tg.reply(OWNER)).text
    assert session.startswith("This session (") and "2 calls · 3,200 tokens in" in session
    await tg.send(OWNER, "/usage footer sideways")
    assert (await tg.reply(OWNER)).text.startswith("Usage: /usage")
    await tg.send(OWNER, "/usage footer off")
    await tg.reply(OWNER)
    tg.llm.add(Text("third answer", usage=usage(10, 1)))
    await tg.send(OWNER, "and again")
    assert (await tg.reply(OWNER)).text == "third answer"


async def test_context_and_usage_agree_on_the_last_request(tg: TG) -> None:
    tg.llm.add(Text("noted", usage=usage(4321, 12)))
    await tg.send(OWNER, "remember that I like tea")
    await tg.reply(OWNER)
    await tg.send(OWNER, "/context")
    context = (await tg.reply(OWNER)).text
    await tg.send(OWNER, "/usage")
    report = (await tg.replies(OWNER, 2))[1].text  # the chart, then the text
    line = next(x for x in context.splitlines() if x.startswith("Last request"))
    assert "sent 4,321 tokens (provider's count)" in line
    assert line in report.splitlines()


async def test_model_switch_persists_across_restart(
    make_tg: Callable[..., Awaitable[TG]],
) -> None:
    tg = await make_tg(llm_model="fake-model,big-model")
    await tg.send(OWNER, "/model")
    text = (await tg.reply(OWNER)).text
    lines = ["Your model: fake-model", "→ fake-model (default)", "• big-model"]
    assert text.splitlines()[:3] == lines
    await tg.send(OWNER, "/model big-model")
    assert (await tg.reply(OWNER)).text == "Your model is now big-model."
    await tg.send(OWNER, "/model nonsense")
    assert "Pick one of: fake-model, big-model" in (await tg.reply(OWNER)).text
    await tg.restart()
    await tg.send(OWNER, "/model")
    assert (await tg.reply(OWNER)).text.startswith("Your model: big-model")
    await tg.send(OWNER, "hi")
    await tg.reply(OWNER)
    await tg.send(2001, "hi")  # others keep the default
    await tg.reply(2001)
    assert [r["model"] for r in tg.llm.requests] == ["big-model", "fake-model"]
    await tg.send(OWNER, "/model default")
    assert (await tg.reply(OWNER)).text == "Back to the default model: fake-model."


async def test_sidekick_usage_prints_the_report(tg: TG) -> None:
    import asyncio

    tg.llm.add(Text("ok", usage=usage(777, 7)))
    await tg.send(OWNER, "hello")
    await tg.reply(OWNER)
    env = {"PATH": "/usr/bin:/bin", "DATA_DIR": str(tg.settings.data_dir),
           "BUDGET_USD": "2/day", "PRICES": "fake-model=1000/1000",
           "PYTHONPATH": ROOT}  # fmt: skip
    if tg.settings.database_url:  # make test-pg: the bot's database is a server
        env["DATABASE_URL"] = tg.settings.database_url
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot.cli", "usage",
        env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await proc.communicate()
    assert proc.returncode == 0, err.decode()
    text = out.decode()
    assert text.startswith("Model usage (everyone)")
    # The price in force when the call was made counts, not today's PRICES.
    assert "1 call · 777 tokens in · 7 out · price unknown (tokens only)" in text
    assert re.search(r"Budget today: \$0\.00 of \$2\.00 \(0%\)", text)


async def test_usage_names_the_costliest_models_and_counts_the_rest(
    make_tg: Callable[..., Awaitable[TG]],
) -> None:
    """Hundreds of model names (a proxy's per-request aliases) were each a line: the reply
    ran to hundreds of messages. The costliest come first, the rest are one line."""
    from sqlalchemy import select

    from bot.usage.repo import add_usage
    from bot.usage.report import TOP_MODELS
    from db.models.core import User

    tg = await make_tg(prices=PRICES)
    tg.llm.add(Text("hi", usage=usage(10, 1)))
    await tg.send(OWNER, "hello")
    await tg.reply(OWNER)
    async with tg.app.session_factory() as s, s.begin():
        user_id = await s.scalar(select(User.id).where(User.telegram_id == OWNER))
        for i in range(300):
            await add_usage(
                s, user_id=user_id, purpose="chat", model=f"alias-{i:03d}", prompt_tokens=1,
                completion_tokens=1, cached_tokens=0, reasoning_tokens=0, estimated=False,
                cost_usd=i / 1000,
            )  # fmt: skip
    await tg.send(OWNER, "/usage")
    _chart, text = await tg.replies(OWNER, 2)
    lines = text.text.splitlines()
    models = lines[
        lines.index("By model (this month):") + 1 : lines.index("By purpose (this month):")
    ]
    assert len(models) == TOP_MODELS + 1
    assert models[0].startswith("  alias-299 — 1 call")  # the costliest first
    assert models[-1].startswith(f"  {301 - TOP_MODELS} other models — {301 - TOP_MODELS} calls")
    assert "chat — 301 calls" in text.text
