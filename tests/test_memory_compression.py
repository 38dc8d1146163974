"""Long sessions: the oldest turns are replaced by a verified summary, never silently lost."""

from __future__ import annotations

import re
from typing import Any

import pytest
from sqlalchemy import func, select

from bot.agent import prompt
from bot.agent.prompt import without_context
from bot.agent.runner import Agent, Incoming
from bot.app import App
from bot.sessions import history
from bot.sessions import repo as sessions_repo
from bot.sessions.models import SessionCompression
from db.models import Message
from tests.prompt_blocks import earlier_of
from tests.scripted_model import Say, ScriptedModel
from tools.registry import Registry


@pytest.fixture(autouse=True)
def _constants(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tests below set the history budget and the review mode: restored after each."""
    monkeypatch.setattr(prompt, "HISTORY_TOKEN_BUDGET", prompt.HISTORY_TOKEN_BUDGET)
    monkeypatch.setattr(history, "SUMMARY_REVIEW", history.SUMMARY_REVIEW)


FACT = "My sister Ingrid lives in Tromsø and turns 41 on 3 May."


def faithful(messages: list[dict[str, Any]]) -> str:
    """A scripted summariser that keeps the one fact the turns (or the summary before) hold."""
    source = messages[-1]["content"]
    said = "The user said that their sister Ingrid lives in Tromsø and turns 41 on 3 May. "
    return (said if "Ingrid" in source else "") + "The rest was small talk about the weather."


def inventive(messages: list[dict[str, Any]]) -> str:
    return faithful(messages) + " Ingrid was born in 1987 in Bergen."


def agent_for(app: App, model: ScriptedModel, budget: int = 600) -> Agent:
    agent = app.agent
    agent.llm = model
    agent.registry = Registry([])
    prompt.HISTORY_TOKEN_BUDGET = budget  # put back by the autouse fixture below
    return agent


async def handled(app: App, agent: Agent, incoming: Incoming) -> None:
    """One message, then the summary it found due, written after the answer (in the
    background: awaited here so that each test reads one order of events)."""
    await agent.handle(incoming)
    await app.part(history.COMPRESSIONS).idle()


def chat(i: int) -> str:
    return FACT if i == 3 else f"Message {i}: small talk about the weather, nothing else."


async def stored(app: App) -> int:
    async with app.session_factory() as s:
        return int((await s.execute(select(func.count()).select_from(Message))).scalar_one())


async def test_a_fact_from_turn_3_reaches_turn_300_through_a_verified_summary(app: App) -> None:
    model = ScriptedModel(writer=faithful)
    agent = agent_for(app, model)
    for i in range(1, 301):
        model.add(Say(f"ok {i}"))
        await handled(app, agent, Incoming(chat(i), telegram_user_id=21))
    last = model.requests[-1]
    system = earlier_of(last[1]["content"])  # the note at the cut
    assert "Ingrid lives in Tromsø and turns 41 on 3 May" in system
    ranges = re.findall(r"\[compressed\] Turns (\d+)–(\d+) of this conversation \(", system)
    assert ranges and ranges[0][0] == "1"  # the summary names the range it covers
    covered = int(ranges[0][1])
    # What follows the summary starts right after the covered range, or after the turns
    # trimmed until the next summary (written in the background: the model is told), and
    # ends at turn 300.
    gap = re.findall(r"\[not shown\] Turns (\d+)–(\d+) ", system)
    if gap:
        assert int(gap[0][0]) == covered + 1
        covered = int(gap[0][1])
    assert without_context(last[1]["content"]) == chat(covered // 2 + 1)
    assert last[-1]["content"].endswith(chat(300))
    assert all(FACT not in m["content"] for m in last[1:])  # turn 3 itself is gone
    assert await stored(app) == 600  # every turn is still stored
    assert model.written  # the summaries were written by model calls
    async with app.session_factory() as s:
        verified, rejected = await sessions_repo.compression_counts(s)
    # Summaries were rolled forward many times, each one grounded: no false reject.
    assert verified >= 10 and rejected == 0, (verified, rejected)


async def test_a_summary_with_an_invented_name_or_number_is_rejected_and_the_turns_stay(
    app: App,
) -> None:
    model = ScriptedModel(writer=inventive)
    agent = agent_for(app, model)
    for i in range(1, 41):
        model.add(Say(f"ok {i}"))
        await handled(app, agent, Incoming(chat(i), telegram_user_id=22))
    async with app.session_factory() as s:
        rows = list((await s.execute(select(SessionCompression))).scalars())
        assert (await sessions_repo.compression_counts(s))[1] == len(rows) >= 1
    assert "1987" in (rows[0].reason or "") and "Bergen" in (rows[0].reason or "")
    # Not retried on every message: one rejected attempt per twenty new messages at most.
    assert len(rows) <= 1 + (80 - 2 * 10) // 20
    system = earlier_of(model.requests[-1][1]["content"])
    assert "Bergen" not in system and "[compressed]" not in system
    # The model is told which turns it does not see.
    assert re.search(r"\[not shown\] Turns 1–\d+ of this conversation", system)
    assert await stored(app) == 80


async def test_after_rejections_the_next_summary_still_covers_a_bounded_range(app: App) -> None:
    # Rejected summaries leave a long uncovered range behind; when a faithful summary is
    # possible again it covers the oldest part first, in a call no larger than the budget.
    writer = {"fn": inventive}
    model = ScriptedModel(writer=lambda messages: writer["fn"](messages))
    agent = agent_for(app, model, budget=400)
    for i in range(1, 121):
        if i == 80:
            writer["fn"] = faithful
        model.add(Say(f"ok {i}"))
        await handled(app, agent, Incoming(chat(i), telegram_user_id=24))
    calls = [m for m in model.written if m[0]["content"].startswith("You compress")]
    assert all(len(m[1]["content"]) // 4 <= 400 + 50 for m in calls)
    async with app.session_factory() as s:
        verified, rejected = await sessions_repo.compression_counts(s)
    assert rejected >= 2 and verified >= 2
    system = earlier_of(model.requests[-1][1]["content"])
    assert "Ingrid lives in Tromsø" in system and "[compressed] Turns 1–" in system
    assert await stored(app) == 240


async def test_a_rejected_summary_is_asked_for_again_naming_what_was_invented(app: App) -> None:
    # The one summary service archive uses too: a summary that fails the grounding check is
    # asked for once more with the problem named, and a faithful second try is kept.
    def corrected(messages: list[dict[str, Any]]) -> str:
        if messages[-1]["content"].startswith("That will not do"):
            return faithful(messages[:2])
        return inventive(messages)

    model = ScriptedModel(writer=corrected)
    agent = agent_for(app, model)
    for i in range(1, 31):
        model.add(Say(f"ok {i}"))
        await handled(app, agent, Incoming(chat(i), telegram_user_id=25))
    retries = [m for m in model.written if m[-1]["content"].startswith("That will not do")]
    assert retries and "1987" in retries[0][-1]["content"] and "Bergen" in retries[0][-1]["content"]
    assert "Bergen" not in retries[0][0]["content"]  # the same instruction, asked again
    async with app.session_factory() as s:
        verified, rejected = await sessions_repo.compression_counts(s)
    assert verified >= 1 and rejected == 0, (verified, rejected)
    system = earlier_of(model.requests[-1][1]["content"])
    assert "Ingrid lives in Tromsø" in system and "Bergen" not in system


async def test_with_summary_review_model_a_reviewer_in_a_fresh_context_can_refuse(
    app: App,
) -> None:
    def reviewer_refuses(messages: list[dict[str, Any]]) -> str:
        if messages[0]["content"].startswith("You check a summary"):
            return "FAIL: the turns never say where Ingrid lives."
        return faithful(messages)

    model = ScriptedModel(writer=reviewer_refuses)
    agent = agent_for(app, model)
    history.SUMMARY_REVIEW = "model"
    for i in range(1, 31):
        model.add(Say(f"ok {i}"))
        await handled(app, agent, Incoming(chat(i), telegram_user_id=23))
    reviews = [m for m in model.written if m[0]["content"].startswith("You check a summary")]
    assert reviews and len(reviews[0]) == 2  # only the turns and the summary, nothing else
    assert "Summary:\nThe user said that their sister Ingrid" in reviews[0][1]["content"]
    async with app.session_factory() as s:
        rows = list((await s.execute(select(SessionCompression))).scalars())
    assert rows and not any(r.verified for r in rows)
    assert (rows[0].reason or "").startswith("reviewer: FAIL")
    assert "[compressed]" not in earlier_of(model.requests[-1][1]["content"])


async def test_the_servers_context_size_bounds_the_history(app: App) -> None:
    # A model whose server says its context holds 4,096 tokens (llama.cpp's /props): the
    # answer's share is capped at a quarter, so the history gets what is left after the
    # prefix, not HISTORY_TOKEN_BUDGET and not nothing.
    from bot.agent.prompt import PREFIX_RESERVE, history_budget
    from bot.agent.prompt import context_size as context_of

    class SmallContext(ScriptedModel):
        async def context_tokens(self, model: str | None = None) -> int:
            return 4096

    prompt.HISTORY_TOKEN_BUDGET = 100_000
    settings = app.agent.settings.model_copy(update={"llm_max_output_tokens": 4096})
    assert await context_of(SmallContext()) == 4096
    assert await context_of(ScriptedModel()) is None  # a client that cannot tell
    assert history_budget(settings, 4096) == 4096 - 1024 - PREFIX_RESERVE
    assert history_budget(settings, None) == 100_000


async def test_a_range_another_writer_is_summarising_is_not_summarised_twice(app: App) -> None:
    """While one writer holds the session's compression lease (a scheduled task of the same
    session, another worker), a message trims instead of starting a second summary call
    for the same range; once the lease is free the range is summarised, once."""
    from datetime import timedelta

    from db.repos import core as core_repo

    model = ScriptedModel(writer=faithful)
    agent = agent_for(app, model)
    model.add(Say("ok 1"))
    await handled(app, agent, Incoming(chat(1), telegram_user_id=23))
    async with app.session_factory() as s, s.begin():
        user = await core_repo.get_or_create_user(s, 23, "", app.deps.clock())
        session = await core_repo.current_session(s, user.id)
        assert session is not None
        await sessions_repo.archive_row(s, session.id)
        now = app.deps.clock()
        held = await sessions_repo.take_lease(
            s, session.id, "compressing_until", now, now + timedelta(hours=1)
        )
        assert held
    for i in range(2, 31):
        model.add(Say(f"ok {i}"))
        await handled(app, agent, Incoming(chat(i), telegram_user_id=23))
    assert model.written == []  # no summary call while the other writer holds it
    assert "[not shown]" in earlier_of(model.requests[-1][1]["content"])
    async with app.session_factory() as s, s.begin():
        await sessions_repo.drop_lease(s, session.id, "compressing_until")
    model.add(Say("ok 31"))
    await handled(app, agent, Incoming(chat(31), telegram_user_id=23))
    assert len(model.written) == 1  # written after the answer, in the background
    model.add(Say("ok 32"))
    await handled(app, agent, Incoming(chat(32), telegram_user_id=23))
    assert "[compressed]" in earlier_of(model.requests[-1][1]["content"])
