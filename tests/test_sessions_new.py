"""The one path for a new session: /newsession, the terminal's /new and the model's request."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from bot.agent.prompt import without_context
from bot.agent.runner import Agent, Incoming
from bot.sessions.background import BackgroundArchive
from bot.sessions.lifecycle import SessionTurns, new_session_tool, start_new_session
from db.repos import core as core_repo
from tests.fakes.openai_server import Calls, Error, FakeOpenAI, Text
from tests.sessions_env import Env, make_env, summary_requests
from tools.base import ToolDeps
from tools.hooks import Always, Periods
from tools.memory.store import MEMORY
from tools.memory.tool import build as memory_tool
from tools.registry import Registry

pytestmark = pytest.mark.db  # every test here opens its own database

T0 = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
SUMMARY = "The user asked for a bread recipe and chose a sourdough with rye flour."


async def test_new_session_archives_the_old_one(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    async with make_env(tmp_path, fake_llm, T0) as env:
        uid, old = await env.chat(5, "give me a bread recipe", "Try a rye sourdough")
        fake_llm.add(Text(SUMMARY))
        env.clock.advance(minutes=30)
        new = await start_new_session(
            env.sf, env.clock, telegram_user_id=5, name="Baking", archiver=env.archiver
        )
        assert new.ended_session_id == old and new.session_id != old
        assert new.name == "Baking"
        assert new.archive is not None and new.archive.status == "archived"
        assert (await env.session(old)).ended_at == env.clock.now
        assert (await env.session(new.session_id)).ended_at is None
        short = await env.memories(uid, "short")
        assert [m.content for m in short] == [f"2026-11-20: {SUMMARY}"]
        # The next message goes into the new session, which starts empty.
        _, current = await env.chat(5, "hello")
        assert current == new.session_id
        assert [m.content for m in await env.messages(current)] == ["hello"]


async def test_new_session_with_the_model_down_is_archived_later(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    async with make_env(tmp_path, fake_llm, T0) as env:
        uid, old = await env.chat(5, "give me a bread recipe", "Try a rye sourdough")
        fake_llm.add(Error(502), Error(502), Error(502))
        new = await start_new_session(env.sf, env.clock, telegram_user_id=5, archiver=env.archiver)
        # The user still gets a fresh session at once; the summary is pending.
        assert new.archive is not None and new.archive.status == "failed"
        assert (await env.session(old)).ended_at is not None
        assert await env.memories(uid) == []
        env.clock.advance(minutes=2)
        fake_llm.add(Text(SUMMARY))
        report = await env.jobs.split_sessions()
        assert report.archived == [old]
        assert len(await env.memories(uid, "short")) == 1
        assert (await env.session(new.session_id)).ended_at is None  # not due yet


async def test_first_session_and_empty_old_session(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    async with make_env(tmp_path, fake_llm, T0) as env:
        first = await start_new_session(
            env.sf, env.clock, telegram_user_id=6, archiver=env.archiver
        )
        assert first.ended_session_id is None and first.archive is None
        second = await start_new_session(
            env.sf, env.clock, telegram_user_id=6, archiver=env.archiver
        )
        assert second.ended_session_id == first.session_id
        assert second.archive is not None and second.archive.status == "empty"
        assert fake_llm.requests == []


def agent_for(env: Env, http: httpx.AsyncClient) -> Agent:
    deps = ToolDeps(
        settings=env.settings,
        session_factory=env.sf,
        http=http,
        llm=env.llm,
        clock=env.clock,
        parts={MEMORY: env.memory},
    )
    agent = Agent(
        settings=env.settings,
        session_factory=env.sf,
        llm=env.llm,
        registry=Registry([memory_tool(deps), new_session_tool(deps)]),
        clock=env.clock,
    )
    sessions = SessionTurns(env.sf, env.clock, BackgroundArchive(None))
    agent.requests, agent.turn_policy = [Always(sessions)], Periods(env.settings.session_policy)
    return agent


async def test_the_model_can_start_a_new_session(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    async with make_env(tmp_path, fake_llm, T0) as env, httpx.AsyncClient() as http:
        agent = agent_for(env, http)
        first = await agent.handle(Incoming("I like rye bread", telegram_user_id=9))
        fake_llm.add(Calls([("new_session", {})]), Text("Fresh start! What's next?"))
        reply = await agent.handle(Incoming("let's start over", telegram_user_id=9))
        # The reply still reaches the user, and the session it belongs to is closed.
        assert reply.text == "Fresh start! What's next?"
        assert reply.session_id == first.session_id
        assert (await env.session(first.session_id)).ended_at is not None
        # The next message starts with an empty history.
        third = await agent.handle(Incoming("hello again", telegram_user_id=9))
        assert third.session_id != first.session_id
        sent = fake_llm.requests[-1]["messages"]
        assert [without_context(m["content"]) for m in sent[1:]] == ["hello again"]
        # The closed session is summarised by the scheduler's next run.
        fake_llm.add(Text(SUMMARY))
        assert (await env.jobs.split_sessions()).archived == [first.session_id]
        assert len(summary_requests(fake_llm)) == 1
        uid = (await env.session(first.session_id)).user_id
        assert [m.session_id for m in await env.memories(uid, "short")] == [first.session_id]


async def test_a_message_after_the_split_time_opens_a_new_session(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    """The scheduler has not run yet (bot just restarted): the message must not land in
    yesterday's session; the old one waits for its summary and is archived once."""
    t0 = datetime(2026, 11, 20, 22, 30, tzinfo=UTC)  # 23:30 in Berlin
    async with (
        make_env(tmp_path, fake_llm, t0, timezone="Europe/Berlin") as env,
        httpx.AsyncClient() as http,
    ):
        agent = agent_for(env, http)
        first = await agent.handle(Incoming("what should I cook tonight?", telegram_user_id=9))
        env.clock.now = datetime(2026, 11, 20, 22, 59, tzinfo=UTC)  # 23:59: same period
        same = await agent.handle(Incoming("and for dessert?", telegram_user_id=9))
        assert same.session_id == first.session_id
        env.clock.now = datetime(2026, 11, 20, 23, 1, tzinfo=UTC)  # 00:01 in Berlin
        nxt = await agent.handle(Incoming("good morning", telegram_user_id=9))
        assert nxt.session_id != first.session_id
        assert [without_context(m["content"]) for m in fake_llm.requests[-1]["messages"][1:]] == [
            "good morning"
        ]
        old = await env.session(first.session_id)
        assert old.ended_at == env.clock.now
        fake_llm.add(Text(SUMMARY))
        report = await env.jobs.split_sessions()
        assert report.archived == [first.session_id]  # the new session is not due
        assert (await env.jobs.split_sessions()).total == 0
        uid = old.user_id
        assert [m.session_id for m in await env.memories(uid, "short")] == [first.session_id]
        # A user in another zone is not affected by Berlin's midnight.
        await agent.handle(Incoming("hi from LA", telegram_user_id=10))
        async with env.sf() as s:
            la = await core_repo.get_or_create_user(s, 10, "", env.clock())
            la.timezone = "America/Los_Angeles"
            await s.commit()
        env.clock.advance(hours=2)
        a = await agent.handle(Incoming("still here", telegram_user_id=10))
        b = await agent.handle(Incoming("and again", telegram_user_id=10))
        assert a.session_id == b.session_id
        sent = [without_context(m["content"]) for m in fake_llm.requests[-1]["messages"][1:]]
        assert sent[0] == "hi from LA" and sent[-1] == "and again"


async def test_a_named_session_keeps_its_name_in_the_memory(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    t0 = datetime(2026, 11, 20, 23, 30, tzinfo=UTC)  # already Nov 21 in Tokyo
    async with make_env(tmp_path, fake_llm, t0, timezone="Asia/Tokyo") as env:
        named = await start_new_session(env.sf, env.clock, telegram_user_id=5, name="Baking")
        uid, sid = await env.chat(5, "give me a bread recipe", "Try a rye sourdough")
        assert sid == named.session_id
        fake_llm.add(Text(SUMMARY))
        await start_new_session(env.sf, env.clock, telegram_user_id=5, archiver=env.archiver)
        short = await env.memories(uid, "short")
        assert [m.content for m in short] == [f"2026-11-21 (Baking): {SUMMARY}"]


async def test_session_listing_counts_what_the_user_sees(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    from bot.sessions import repo as sessions_repo

    async with make_env(tmp_path, fake_llm, T0) as env, httpx.AsyncClient() as http:
        agent = agent_for(env, http)
        fake_llm.add(Calls([("memory", {"action": "list"})]), Text("You have no memories."))
        await agent.handle(Incoming("what do you remember?", telegram_user_id=3))
        async with env.sf() as s:
            user = await core_repo.get_or_create_user(s, 3, "", env.clock())
            lines = await sessions_repo.recent_sessions(s, user.id)
        assert [(line.messages, line.summary, line.ended_at) for line in lines] == [
            (2, None, None)  # question and answer; not the tool call and its result
        ]
        assert len(await env.messages(lines[0].session_id)) == 4
