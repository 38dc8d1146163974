"""Long conversations through the assembled app: the history is compressed into a verified
summary, and a llama.cpp server's own context size (its /props) bounds every prompt.

The app is the one `sidekick run` builds (bot/app.py), behind the fake Telegram; the model is
the loopback fake speaking the OpenAI protocol, playing llama-server where a test says so.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from itertools import pairwise
from typing import Any

import pytest
from sqlalchemy import func, select

from bot.agent import prompt as history
from bot.agent.prompt import without_context
from bot.sessions import history as sessions_history
from bot.sessions.history import RETRY_AFTER_MESSAGES, TRIM_STEP
from bot.sessions.models import SessionArchive, SessionCompression
from bot.usage.models import ModelUsage
from db.conversation import Conversation, Started
from db.conversation import Turn as ConversationTurn
from db.models.core import Message
from tests.e2e.conftest import OWNER, TG
from tests.fakes.openai_server import FakeOpenAI, Text, Turn, echo, prompt_tokens
from tests.prompt_blocks import earlier_of

FACT = "Please note: my locker code is 4711."


def chat(i: int, pad: int = 0) -> str:
    text = FACT if i == 1 else f"Message {i}: small talk about the weather, nothing else."
    return text + (" The sky is grey and the wind is calm today." * pad)


def summariser(body: dict[str, Any]) -> Turn:
    """A faithful model: a summary request (the app's only plain, non-streamed call here)
    gets a summary that keeps the one fact the turns, or the summary before them, hold;
    the chat gets an echo."""
    if body.get("stream"):
        return echo(body)
    source = body["messages"][-1]["content"]
    fact = "The user said that their locker code is 4711. " if "4711" in source else ""
    return Text(fact + "The rest was small talk about the weather.")


def chat_requests(llm: FakeOpenAI) -> list[list[dict[str, Any]]]:
    return [r["messages"] for r in llm.requests if r.get("stream")]


async def answered_elsewhere(other: Conversation, turns: range) -> Started:
    """Another worker (its own conversation seam) answers `turns`; its last turn as begun."""
    for i in turns:
        started = await other.begin_turn(
            telegram_id=OWNER, user_name="", text=chat(i), kind="text",
            telegram_message_id=None, request_id=f"other-{i}", now=datetime.now(UTC),
            period_over=lambda started, tz: False,
        )  # fmt: skip
        turn = ConversationTurn(started.session_id, started.user.id, f"other-{i}")
        await other.record_answer(turn, datetime.now(UTC), f"echo: {chat(i)}")
    return started


async def talk(tg: TG, messages: int, pad: int = 0) -> None:
    """One message at a time, as a person types: each answer arrives before the next one."""
    for i in range(1, messages + 1):
        await tg.send(OWNER, chat(i, pad))
        reply = await tg.reply(OWNER)
        assert reply.text == f"echo: {chat(i, pad)}", (i, reply.text)


async def test_a_long_chat_is_compressed_and_a_fact_from_its_first_message_survives(
    make_tg: Callable[..., Awaitable[TG]], fake_llm: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake_llm.responder = summariser
    # HISTORY_TOKEN_BUDGET is a constant beside the compressor now, no longer a setting.
    monkeypatch.setattr(history, "HISTORY_TOKEN_BUDGET", 300)
    tg = await make_tg()
    await talk(tg, 30)
    # A summary asked for by the last turns may still be in the background: its model call
    # is metered before its row is stored, so read both once it is done.
    await tg.app.part(sessions_history.COMPRESSIONS).idle()

    async with tg.app.session_factory() as s:
        rows = list((await s.execute(select(SessionCompression))).scalars())
        summary_usage = (
            await s.execute(select(ModelUsage).where(ModelUsage.purpose == "archive"))
        ).scalars()
    assert rows and all(r.verified for r in rows), [(r.verified, r.reason) for r in rows]
    # The summaries were model calls the app metered like any other (budgets and usage).
    assert len(list(summary_usage)) == len(rows)

    last = chat_requests(fake_llm)[-1]
    # The summary stands in front of the first turn shown (the system message stays).
    system, cut = last[0]["content"], earlier_of(last[1]["content"])
    assert "[compressed]" not in system
    assert cut.startswith("[compressed] Turns 1–") and "locker code is 4711" in cut
    sent = [without_context(m["content"]) for m in last[1:]]
    assert FACT not in sent and chat(2) not in sent  # the old turns are no longer sent...
    assert sent[-1] == chat(30)  # ...the newest are, up to this message
    covered = int(re.findall(r"\[compressed\] Turns 1–(\d+) ", cut)[0])
    # Right after what the summary covers, or after the turns trimmed until the next
    # summary (written in the background), which the model is told it does not see.
    gap = re.findall(r"\[not shown\] Turns (\d+)–(\d+) ", cut)
    if gap:
        assert int(gap[0][0]) == covered + 1
        covered = int(gap[0][1])
    assert sent[0] == chat(covered // 2 + 1)


@pytest.mark.parametrize(
    ("said_by", "overrides"),
    [("props", {}), ("setting", {"llm_context_tokens": 4096})],
)
async def test_the_context_size_bounds_every_prompt(
    make_tg: Callable[..., Awaitable[TG]],
    fake_llm: FakeOpenAI,
    said_by: str,
    overrides: dict[str, Any],
) -> None:
    # llama-server started with -c 4096: it refuses longer prompts, and says its size in
    # /props; or a proxy hides /props and the operator set LLM_CONTEXT_TOKENS instead.
    fake_llm.n_ctx, fake_llm.props = 4096, said_by == "props"
    fake_llm.responder = summariser
    tg = await make_tg(**overrides)  # HISTORY_TOKEN_BUDGET as shipped
    await talk(tg, 24, pad=8)

    assert fake_llm.refused == []
    prompts = [prompt_tokens(r) for r in fake_llm.requests if "messages" in r]
    # The conversation outgrew the context: unbounded, the last prompt would not fit.
    whole = sum(len(chat(i, 8)) * 2 for i in range(1, 25)) // 4
    assert whole > fake_llm.n_ctx and max(prompts) < fake_llm.n_ctx
    cut = earlier_of(chat_requests(fake_llm)[-1][1]["content"])
    assert "locker code is 4711" in cut  # compressed, not dropped


async def test_the_turn_after_a_summary_shows_it_and_every_turn_after_what_it_covers(
    make_tg: Callable[..., Awaitable[TG]], fake_llm: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The window the summary leaves is kept for the session's next message (bot/sessions/
    # history.py Compressor.compress), which then reads neither the summary nor the turns
    # back: each prompt shows the newest summary stored before it, then the turns after what
    # it covers, none twice, none left out unsaid, up to this one. The summary's row lets go
    # of the session's compression lease as it is stored. The budget leaves the recent turns
    # a summary keeps more rows than a message reads with it (db/conversation.py
    # HISTORY_ROWS), so the next message extends that window rather than read it whole.
    fake_llm.responder = summariser
    monkeypatch.setattr(history, "HISTORY_TOKEN_BUDGET", 4600)
    tg = await make_tg()
    turns = 90
    rows = [m for i in range(1, turns + 1) for m in (chat(i), f"echo: {chat(i)}")]
    summaries = set()
    for n in range(1, turns + 1):
        async with tg.app.session_factory() as s:
            newest = (
                await s.execute(
                    select(SessionCompression)
                    .where(SessionCompression.verified)
                    .order_by(SessionCompression.id.desc())
                    .limit(1)
                )
            ).scalar_one_or_none()
        await tg.send(OWNER, chat(n))
        assert (await tg.reply(OWNER)).text == f"echo: {chat(n)}"
        await tg.app.part(sessions_history.COMPRESSIONS).idle()  # stored before the next turn
        prompt = chat_requests(fake_llm)[-1]
        cut = earlier_of(prompt[1]["content"])
        sent = [without_context(m["content"]) for m in prompt[1:]]
        first = len(rows[: 2 * n - 1]) - len(sent)  # the rows before the first one shown
        assert sent == rows[first : 2 * n - 1], (n, sent)
        covered = 0
        if newest is not None:
            summaries.add(newest.id)
            covered = newest.last_turn
            assert cut.startswith(f"[compressed] Turns 1–{covered} "), (n, cut)
            assert newest.summary in cut
        gap = re.findall(r"\[not shown\] Turns (\d+)–(\d+) ", cut)
        assert gap == ([(str(covered + 1), str(first))] if first > covered else []), (n, gap)
    assert summaries  # prompts after a summary were checked
    async with tg.app.session_factory() as s:
        leases = (await s.execute(select(SessionArchive.compressing_until))).scalars().all()
    assert leases == [None]


def inventor(body: dict[str, Any]) -> Turn:
    """A model whose every summary states what nobody said (rejected), so the uncovered
    range only grows; the chat gets an echo."""
    if body.get("stream"):
        return echo(body)
    return Text("The user is 20 years old and lives in Paris.")


async def test_a_session_whose_summaries_fail_shows_the_newest_turns_in_steady_steps(
    make_tg: Callable[..., Awaitable[TG]], fake_llm: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Far more rows than one read of the newest ones (a page of 16 here, 256 as shipped):
    # each message reads back only what it can show, the rest it counts.
    fake_llm.responder = inventor
    monkeypatch.setattr(history, "HISTORY_TOKEN_BUDGET", 300)
    monkeypatch.setattr(sessions_history, "PAGE_ROWS", 16)
    tg = await make_tg()
    await talk(tg, 90)

    async with tg.app.session_factory() as s:
        rows = list((await s.execute(select(SessionCompression))).scalars())
        # A rejected range is tried again only once the session has grown well since.
        grew = [
            (
                await s.execute(
                    select(func.count()).where(
                        Message.created_at > before.created_at,
                        Message.created_at < after.created_at,
                    )
                )
            ).scalar_one()
            for before, after in pairwise(rows)
        ]
    assert rows and not any(r.verified for r in rows)  # nothing was ever compressed away
    assert len(rows) > 1 and min(grew) >= RETRY_AFTER_MESSAGES, grew

    firsts = []
    for n, request in enumerate(chat_requests(fake_llm)[40:], start=41):
        sent = [without_context(m["content"]) for m in request[1:]]
        assert sent[-1] == chat(n)  # the newest turn always
        first = next(i for i in range(1, n + 1) if chat(i) == sent[0])
        # The model is told exactly which turns it does not see: the rows before the first
        # shown (the person's and the echo's), and the first shown starts a step of
        # TRIM_STEP of the person's turns, so a provider's cached prefix holds for a while.
        gap = re.findall(r"\[not shown\] Turns 1–(\d+) ", earlier_of(request[1]["content"]))
        assert gap == [str(2 * (first - 1))], (n, first, gap)
        assert (first - 1) % TRIM_STEP == 0, (n, first)
        assert sum(len(m["content"]) for m in request[1:]) // 4 < 300 + 200  # within budget
        firsts.append(first)
    assert firsts == sorted(firsts) and len(set(firsts)) < len(firsts) // 2  # steady steps


async def test_a_kept_window_shows_what_another_worker_wrote_since(
    make_tg: Callable[..., Awaitable[TG]], fake_llm: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The process keeps a long session's window between its messages (bot/sessions/history.py
    # _Newest.extended); another worker on the same database writes a verified summary, and
    # then more turns than one message reads back: this worker's next prompts show both.
    fake_llm.responder = inventor  # this worker's own summaries are all rejected
    monkeypatch.setattr(history, "HISTORY_TOKEN_BUDGET", 300)
    monkeypatch.setattr(sessions_history, "PAGE_ROWS", 16)
    tg = await make_tg()
    await talk(tg, 20)
    other = Conversation(tg.app.session_factory)  # the other worker's seam, its own

    async def here(i: int) -> list[dict[str, Any]]:
        """This worker answers turn `i`; the prompt it sent."""
        await tg.send(OWNER, chat(i))
        assert (await tg.reply(OWNER)).text == f"echo: {chat(i)}"
        await tg.app.part(sessions_history.COMPRESSIONS).idle()
        return chat_requests(fake_llm)[-1]

    started = await answered_elsewhere(other, range(21, 23))
    async with tg.app.session_factory() as s, s.begin():
        first, last = (
            await s.execute(
                select(func.min(Message.id), func.max(Message.id)).where(
                    Message.session_id == started.session_id, Message.id < started.message_id
                )
            )
        ).one()
        now = datetime.now(UTC)
        summary = SessionCompression(
            session_id=started.session_id, first_message_id=first, last_message_id=last,
            first_turn=1, last_turn=42, covers_from=now, covers_to=now,
            summary="The user's locker code is 4711.", verified=True, created_at=now,
        )  # fmt: skip
        s.add(summary)
    shows_from_the_summary_on(await here(23), 23)
    await answered_elsewhere(other, range(24, 64))  # 80 rows: more than a message reads with it
    shows_from_the_summary_on(await here(64), 64)


def shows_from_the_summary_on(prompt: list[dict[str, Any]], n: int) -> None:
    """The summary of turns 1-42 (rows), then every turn after it up to turn `n` of the
    person's: shown, or said not shown."""
    cut = earlier_of(prompt[1]["content"])
    assert cut.startswith("[compressed] Turns 1–42 ") and "4711" in cut, cut
    sent = [without_context(m["content"]) for m in prompt[1:]]
    shown = next(i for i in range(22, n + 1) if chat(i) == sent[0])
    pairs = [m for i in range(shown, n) for m in (chat(i), f"echo: {chat(i)}")]
    assert sent == [*pairs, chat(n)], sent
    gap = re.findall(r"\[not shown\] Turns (\d+)–(\d+) ", cut)
    assert gap == ([("43", str(2 * (shown - 1)))] if shown > 22 else []), (shown, gap)


async def test_a_session_longer_than_one_read_that_fits_shows_every_turn(
    make_tg: Callable[..., Awaitable[TG]], fake_llm: FakeOpenAI
) -> None:
    # More rows than a message reads with it (db/conversation.py HISTORY_ROWS), all within
    # the budget: the window kept between messages (bot/sessions/history.py _newest) shows
    # every turn, those another worker answered meanwhile included, in order, uncut.
    tg = await make_tg()
    await talk(tg, 34)
    await answered_elsewhere(Conversation(tg.app.session_factory), range(35, 37))
    for n in (37, 38):
        await tg.send(OWNER, chat(n))
        assert (await tg.reply(OWNER)).text == f"echo: {chat(n)}"
        prompt = chat_requests(fake_llm)[-1]
        assert earlier_of(prompt[1]["content"]) == ""  # nothing summarised, nothing left out
        sent = [without_context(m["content"]) for m in prompt[1:]]
        assert sent == [*(m for i in range(1, n) for m in (chat(i), f"echo: {chat(i)}")), chat(n)]
