"""/codestats and /usage charts: a PNG as a photo above the same text; text alone when
there is nothing to draw or no matplotlib."""

from __future__ import annotations

import sys
from datetime import timedelta
from typing import Any

import pytest

from tests.e2e.conftest import OWNER, TG
from tests.fakes.openai_server import Text
from tests.test_usage import usage
from tools.code.models import CodeExecution

PNG = b"\x89PNG\r\n\x1a\n"


async def seed_runs(tg: TG, outcomes: list[tuple[int, bool, str | None]]) -> None:
    """Runs `days_ago` days back, as the code tool traces them."""
    async with tg.app.session_factory() as s, s.begin():
        (user,) = [u async for u in await s.stream_scalars(_owner())]
        now = tg.app.deps.clock()
        for days_ago, ok, category in outcomes:
            s.add(CodeExecution(user_id=user.id, success=ok, error_category=category,
                                created_at=now - timedelta(days=days_ago)))  # fmt: skip


def _owner() -> Any:
    from sqlalchemy import select

    from db.models.core import User

    return select(User).where(User.telegram_id == OWNER)


async def test_codestats_sends_the_runs_chart_above_the_text(tg: TG) -> None:
    await tg.send(OWNER, "/codestats")  # creates the user; nothing to draw yet
    assert "No runs yet" in (await tg.reply(OWNER)).text
    await seed_runs(tg, [(0, True, None), (0, False, "syntax"), (1, False, "timeout"),
                         (3, True, None)])  # fmt: skip
    await tg.send(OWNER, "/codestats")
    chart, text = await tg.replies(OWNER, 2)
    assert chart.method == "sendPhoto" and chart.document is not None
    assert chart.document.startswith(PNG) and len(chart.document) > 5000
    assert text.method == "sendMessage" and "Total: 4" in text.text


async def test_usage_sends_the_spend_chart_and_works_without_matplotlib(
    tg: TG, monkeypatch: pytest.MonkeyPatch
) -> None:
    tg.llm.add(Text("first", usage=usage(1200, 300)))
    await tg.send(OWNER, "hello")
    await tg.reply(OWNER)
    await tg.send(OWNER, "/usage")
    chart, text = await tg.replies(OWNER, 2)
    assert chart.method == "sendPhoto" and chart.document is not None
    assert chart.document.startswith(PNG)
    assert text.text.startswith("Today (") and "1,200 tokens in" in text.text
    # Without the plotting library (a real ImportError): the same text, alone.
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    monkeypatch.setitem(sys.modules, "matplotlib.backends.backend_agg", None)
    await tg.send(OWNER, "/usage")
    alone = await tg.reply(OWNER)
    assert alone.method == "sendMessage" and alone.text == text.text
    await tg.idle()
    assert tg.unread(OWNER) == []
