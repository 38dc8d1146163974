"""Archiving one session: summary checked and kept as a short memory, exactly once."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from bot.sessions.archive import MAX_TRANSCRIPT_CHARS, Archiver, consolidate
from bot.sessions.models import SessionArchive
from bot.sessions.summary import Fact, check_summary, language_of, transcript
from tests.fakes.openai_server import Error, FakeOpenAI, Text
from tests.sessions_env import Env, add_message, make_env, summary_requests

T0 = datetime(2026, 11, 20, 9, 0, tzinfo=UTC)
EN_SUMMARY = (
    "The user is planning a trip to Lisbon in May with their sister and wants a quiet "
    "hotel near the river. We compared two hotels; the booking is still open."
)
DE_SUMMARY = (
    "Der Nutzer plant eine Reise nach Lissabon im Mai mit seiner Schwester und sucht ein "
    "ruhiges Hotel am Fluss. Die Buchung ist noch nicht erledigt."
)
EN_CHAT = (
    "I want to plan a trip to Lisbon in May with my sister",
    "Nice! What kind of hotel are you looking for?",
    "Something quiet near the river, and it should not be too expensive",
    "Here are two options near the river.",
)
DE_CHAT = (
    "Ich möchte im Mai mit meiner Schwester nach Lissabon reisen",
    "Schön! Was für ein Hotel suchst du?",
    "Etwas Ruhiges am Fluss, und es soll nicht zu teuer sein",
    "Hier sind zwei Hotels am Fluss.",
)


async def archive_row(env: Env, session_id: int) -> SessionArchive | None:
    async with env.sf() as s:
        return await s.get(SessionArchive, session_id)


@pytest.mark.db
async def test_archive_keeps_a_checked_summary_as_short_memory(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    async with make_env(tmp_path, fake_llm, T0) as env:
        user_id, sid = await env.chat(1, *EN_CHAT)
        await env.memory.store(
            user_id=user_id, layer="session", content="we are on hotel two", session_id=sid
        )
        await env.memory.store(user_id=user_id, layer="long", content="has a sister called Ana")
        fake_llm.add(Text(EN_SUMMARY))
        env.clock.advance(hours=15)

        result = await env.archiver.archive(sid)

        assert result.status == "archived" and result.summary == EN_SUMMARY
        short = await env.memories(user_id, "short")
        assert len(short) == 1
        assert short[0].content == f"2026-11-20: {EN_SUMMARY}"
        assert short[0].session_id == sid and short[0].category == "session"
        assert await env.memories(user_id, "session") == []  # session memories cleared
        assert len(await env.memories(user_id, "long")) == 1  # others untouched
        session = await env.session(sid)
        assert session.ended_at == env.clock.now
        row = await archive_row(env, sid)
        assert row is not None and row.archived_at == env.clock.now
        assert row.memory_id == short[0].id and row.summary == EN_SUMMARY
        # The model saw the whole conversation and was told which language to use.
        req = summary_requests(fake_llm)[0]
        assert "English" in req["messages"][0]["content"]
        for line in EN_CHAT:
            assert line in req["messages"][1]["content"]
        # Messages are kept: archiving never deletes the conversation.
        assert len(await env.messages(sid)) == len(EN_CHAT)


@pytest.mark.db
async def test_archiving_twice_yields_one_summary(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    async with make_env(tmp_path, fake_llm, T0) as env:
        user_id, sid = await env.chat(1, *EN_CHAT)
        fake_llm.add(Text(EN_SUMMARY))
        first = await env.archiver.archive(sid)
        second = await env.archiver.archive(sid)
        assert (first.status, second.status) == ("archived", "already")
        assert second.summary == EN_SUMMARY
        assert len(await env.memories(user_id, "short")) == 1
        assert len(summary_requests(fake_llm)) == 1


@pytest.mark.db
async def test_a_crash_after_storing_does_not_duplicate(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    """The process dies after the memory was stored but before its id was saved."""
    async with make_env(tmp_path, fake_llm, T0) as env:
        user_id, sid = await env.chat(1, *EN_CHAT)
        fake_llm.add(Text(EN_SUMMARY))

        class DiesAfterStore:
            def __init__(self) -> None:
                self.inner = env.memory

            async def store(self, **kw: Any) -> Any:
                await self.inner.store(**kw)
                raise RuntimeError("killed")

            async def clear_session(self, **kw: Any) -> Any:
                return await self.inner.clear_session(**kw)

        dying = Archiver(env.sf, DiesAfterStore(), env.llm, env.clock)
        assert (await dying.archive(sid)).status == "failed"
        assert (await env.session(sid)).ended_at is None
        env.clock.advance(hours=1)
        assert (await env.archiver.archive(sid)).status == "archived"
        short = await env.memories(user_id, "short")
        assert len(short) == 1 and EN_SUMMARY in short[0].content
        assert len(summary_requests(fake_llm)) == 1  # the saved summary was reused


@pytest.mark.db
async def test_model_failure_keeps_the_session_open_then_succeeds(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    async with make_env(tmp_path, fake_llm, T0) as env:
        user_id, sid = await env.chat(1, *EN_CHAT)
        fake_llm.add(Error(503), Error(503), Error(503))  # every retry of the client fails
        result = await env.archiver.archive(sid)
        assert result.status == "failed" and "ProviderError" in (result.error or "")
        assert (await env.session(sid)).ended_at is None
        assert await env.memories(user_id) == []
        row = await archive_row(env, sid)
        assert row is not None and row.attempts == 1 and row.archived_at is None
        assert row.retry_at == T0 + timedelta(minutes=1)

        fake_llm.add(Text(EN_SUMMARY))
        result = await env.archiver.archive(sid)
        assert result.status == "archived"
        assert (await env.session(sid)).ended_at is not None
        assert len(await env.memories(user_id, "short")) == 1
        # Nothing was lost: all messages are still there.
        assert [m.content for m in await env.messages(sid)] == list(EN_CHAT)


@pytest.mark.db
async def test_summary_in_the_wrong_language_is_asked_again(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    async with make_env(tmp_path, fake_llm, T0) as env:
        user_id, sid = await env.chat(1, *DE_CHAT)
        fake_llm.add(Text(EN_SUMMARY), Text(DE_SUMMARY))
        result = await env.archiver.archive(sid)
        assert result.status == "archived" and result.summary == DE_SUMMARY
        reqs = summary_requests(fake_llm)
        assert "German" in reqs[0]["messages"][0]["content"]
        assert (
            "the summary is in English, the conversation in German"
            in (reqs[1]["messages"][-1]["content"])
        )
        short = await env.memories(user_id, "short")
        assert [m.content for m in short] == [f"2026-11-20: {DE_SUMMARY}"]


@pytest.mark.db
async def test_bad_summaries_are_never_kept(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    async with make_env(tmp_path, fake_llm, T0) as env:
        user_id, sid = await env.chat(1, *DE_CHAT)
        fake_llm.add(Text("   "), Text("x" * 5000))  # empty, then far too long
        result = await env.archiver.archive(sid)
        assert result.status == "failed"
        assert "too long" in (result.error or "")
        assert await env.memories(user_id) == []
        assert (await env.session(sid)).ended_at is None
        # Only the failed attempt's backoff is recorded; the next run tries again.
        env.clock.advance(minutes=5)
        fake_llm.add(Text(EN_SUMMARY), Text(EN_SUMMARY))  # English twice for German: refused
        assert (await env.archiver.archive(sid)).status == "failed"
        row = await archive_row(env, sid)
        assert row is not None and row.attempts == 2 and row.summary is None
        assert row.retry_at == env.clock.now + timedelta(minutes=2)  # backoff doubles


@pytest.mark.db
async def test_a_session_without_user_messages_closes_without_the_model(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    async with make_env(tmp_path, fake_llm, T0) as env:
        user_id, sid = await env.chat(1)
        result = await env.archiver.archive(sid)
        assert result.status == "empty"
        assert (await env.session(sid)).ended_at is not None
        assert fake_llm.requests == [] and await env.memories(user_id) == []
        assert (await env.archiver.archive(sid)).status == "already"
        assert (await env.archiver.archive(9999)).status == "missing"


@pytest.mark.db
async def test_a_session_that_grows_while_summarised_is_retried(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    async with make_env(tmp_path, fake_llm, T0) as env:
        user_id, sid = await env.chat(1, *EN_CHAT)

        class MessageArrivesMeanwhile:
            """The real client; a user message lands while the model is writing."""

            async def complete_text(
                self, messages: Any, max_tokens: int | None = None, **kw: Any
            ) -> str:
                text = await env.llm.complete_text(messages, max_tokens)
                await env.chat(1, "one more thing: I am vegetarian")
                return text

        racing = Archiver(env.sf, env.memory, MessageArrivesMeanwhile(), env.clock)
        fake_llm.add(Text(EN_SUMMARY))
        assert (await racing.archive(sid)).status == "grew"
        assert (await env.session(sid)).ended_at is None
        assert await env.memories(user_id) == []
        fake_llm.add(Text(EN_SUMMARY + " The user is vegetarian."))
        assert (await env.archiver.archive(sid)).status == "archived"
        req = summary_requests(fake_llm)[-1]
        assert "I am vegetarian" in req["messages"][1]["content"]


@pytest.mark.db
async def test_other_users_sessions_and_memories_are_untouched(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    async with make_env(tmp_path, fake_llm, T0) as env:
        a, sid_a = await env.chat(1, *EN_CHAT)
        b, sid_b = await env.chat(2, "hello, remember that I like tea", "Noted!")
        await env.memory.store(user_id=b, layer="session", content="tea talk", session_id=sid_b)
        fake_llm.add(Text(EN_SUMMARY))
        await env.archiver.archive(sid_a)
        assert (await env.session(sid_b)).ended_at is None
        assert [m.content for m in await env.memories(b)] == ["tea talk"]
        assert len(await env.memories(a, "short")) == 1


def test_transcript_skips_tool_noise_and_cuts_the_middle() -> None:
    from db.models import Message

    msgs = [
        Message(id=1, role="user", content="first question"),
        Message(id=2, role="assistant", content="", tool_calls="[]"),
        Message(id=3, role="tool", content="{huge tool output}"),
        Message(id=4, role="assistant", content="an answer"),
    ]
    text = transcript(msgs)
    assert text == "User: first question\n\nSidekick: an answer"
    long = [Message(id=i, role="user", content=f"m{i} " + "y" * 1900) for i in range(40)]
    cut = transcript(long)
    assert len(cut) < MAX_TRANSCRIPT_CHARS + 100
    assert cut.startswith("User: m0 ") and "m39 " in cut and "omitted" in cut


def test_language_checks() -> None:
    assert language_of(" ".join(DE_CHAT)) == "German"
    assert language_of(" ".join(EN_CHAT)) == "English"
    assert language_of("Je voudrais réserver une table pour deux personnes ce soir") == "French"
    assert language_of("Привет, как у тебя дела? Я хочу поехать в Москву") == "CYRILLIC"
    assert language_of("明日は東京で会議があります") == "CJK"
    assert check_summary(DE_SUMMARY, " ".join(DE_CHAT)) is None
    assert check_summary(EN_SUMMARY, " ".join(EN_CHAT)) is None
    assert "English" in (check_summary(EN_SUMMARY, " ".join(DE_CHAT)) or "")
    cyr = "Пользователь хочет поехать в Москву в мае и ищет недорогую гостиницу."
    assert check_summary(cyr, "Привет, как у тебя дела? Я хочу поехать в Москву") is None
    assert "script" in (check_summary(EN_SUMMARY, "Привет, как дела? Я хочу в Москву") or "")
    assert check_summary("", "hi") == "the summary is empty or too short"
    # Short or mixed conversations give no verdict on the language: not refused for it.
    assert check_summary(EN_SUMMARY, "ok") is None


@pytest.mark.db
async def test_archive_state_rows_are_per_session(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    async with make_env(tmp_path, fake_llm, T0) as env:
        _, sid = await env.chat(1, *EN_CHAT)
        fake_llm.add(Text(EN_SUMMARY))
        await env.archiver.archive(sid)
        async with env.sf() as s:
            rows = list((await s.execute(select(SessionArchive))).scalars())
        assert [r.session_id for r in rows] == [sid]


async def add_turns(env: Env, session_id: int, user_id: int, *turns: dict[str, Any]) -> None:
    async with env.sf() as s, s.begin():
        for n, turn in enumerate(turns):
            await add_message(
                s,
                session_id=session_id,
                user_id=user_id,
                request_id=f"t{n}",
                now=env.clock(),
                **turn,
            )


@pytest.mark.db
async def test_a_name_the_failed_session_never_held_is_not_kept(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    """The real small-model case: the only turn failed, the summary invented a name."""
    async with make_env(tmp_path, fake_llm, T0) as env:
        user_id, sid = await env.chat(
            1, "hi, can you remember things for me?", "The model provider rejected the request."
        )
        invented = "The user shared their name, 'John Doe', and asked whether Sidekick remembers."
        fake_llm.add(Text(invented), Text(invented))
        result = await env.archiver.archive(sid)
        assert result.status == "archived"
        assert result.summary is not None and "John Doe" not in result.summary
        # The model was told what it got wrong before its second try.
        retry = summary_requests(fake_llm)[1]["messages"][-1]["content"]
        assert "John Doe" in retry
        (short,) = await env.memories(user_id, "short")
        assert "John" not in short.content and "can you remember things" in short.content


CODE_TURNS: tuple[dict[str, Any], ...] = (
    {"role": "user", "content": "What is the 30th Fibonacci number? Use code."},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": json.dumps(
            [{"id": "c1", "type": "function", "function": {"name": "code", "arguments": "{}"}}]
        ),
    },
    {"role": "tool", "content": "Error: tool code failed: TimeoutError.", "tool_call_id": "c1"},
    {"role": "assistant", "content": "The code did not run, so I have no number for you."},
)


@pytest.mark.db
async def test_a_result_from_code_that_never_ran_is_not_kept(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    async with make_env(tmp_path, fake_llm, T0) as env:
        user_id, sid = await env.chat(1)
        await add_turns(env, sid, user_id, *CODE_TURNS)
        invented = (
            "The user asked for the 30th Fibonacci number; Sidekick wrote code and executed "
            "it, revealing 832040."
        )
        fake_llm.add(Text(invented), Text(invented))
        result = await env.archiver.archive(sid)
        assert result.summary is not None and "832040" not in result.summary
        (short,) = await env.memories(user_id, "short")
        assert "832040" not in short.content and "executed" not in short.content


@pytest.mark.db
async def test_a_faithful_summary_of_the_failed_code_run_is_kept(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    async with make_env(tmp_path, fake_llm, T0) as env:
        user_id, sid = await env.chat(1)
        await add_turns(env, sid, user_id, *CODE_TURNS)
        faithful = (
            "The user asked for the 30th Fibonacci number. Sidekick tried to compute it with "
            "code, but the run failed, so no number was given."
        )
        fake_llm.add(Text(faithful))
        result = await env.archiver.archive(sid)
        assert result.status == "archived" and result.summary == faithful
        assert len(summary_requests(fake_llm)) == 1  # accepted on the first try


@pytest.mark.db
async def test_facts_the_user_stated_become_memories_and_invented_ones_do_not(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    async with make_env(tmp_path, fake_llm, T0) as env:
        user_id, sid = await env.chat(1, *EN_CHAT)
        facts = (
            "\n\nFACTS:\n- plan: Plans a trip to Lisbon in May with their sister."
            "\n- fact: Was born in 1987 in Porto.\n- preference: Wants a quiet hotel."
        )
        fake_llm.add(Text(EN_SUMMARY + facts))
        result = await env.archiver.archive(sid)
        assert result.summary == EN_SUMMARY  # the facts are not part of the summary
        first_user = (await env.messages(sid))[0]
        (plan,) = await env.memories(user_id, "mid")
        assert plan.content == "Plans a trip to Lisbon in May with their sister."
        assert plan.category == "plan" and plan.message_id == first_user.id
        (pref,) = await env.memories(user_id, "long")  # the birth year was never said
        assert pref.category == "preference" and "1987" not in pref.content
        # Stating the same plan again updates the memory instead of adding one.
        again = [Fact("plan", "Plans a trip to Lisbon in May with their sister.")]
        assert await consolidate(env.memory, user_id, await env.messages(sid), again, names=True)
        assert len(await env.memories(user_id, "mid")) == 1
