"""Approvals as a Telegram user meets them: the question with its buttons, allowed once,
denied, unanswered, allowed always then revoked with /approvals, and a group member who
presses someone else's question."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel
from sqlalchemy import select

from bot.app import App
from bot.approvals.gate import APPROVALS, DENIED
from bot.approvals.models import ApprovalDecision
from bot.approvals.questions import CLOSED, NOT_YOURS, answer
from bot.telegram.middlewares import WAITS_FOR_QUESTION
from tests.e2e.conftest import OWNER, TG
from tests.e2e.reminders_env import make_env
from tests.fakes.openai_server import Calls, Text
from tests.fakes.telegram_server import Sent
from tools.base import Tool, ToolCall
from tools.effects import Kind, effects
from tools.registry import Registry

SECRET = "sk-test-secret-key-123456"  # the LLM key make_settings sets


class PostParams(BaseModel):
    url: str
    body: str


def with_post_tool(app: App, posted: list[str], *writes: Kind) -> None:
    """A tool that writes to the internet (risky by default), or to `writes`: it records
    what it 'posted'."""

    async def post(p: PostParams, call: ToolCall) -> str:
        posted.append(p.body)
        return f"posted {len(p.body)} characters"

    fx = effects(writes=writes or ("internet",))
    app.agent.registry = Registry([Tool("post", "Post a body", PostParams, post, effects=fx)])


def button(msg: Sent, label: str) -> str:
    rows = (msg.reply_markup or {})["inline_keyboard"]
    return next(b["callback_data"] for row in rows for b in row if b["text"].startswith(label))


def tool_result(body: dict[str, Any]) -> str:
    return next(m["content"] for m in body["messages"] if m["role"] == "tool")


async def decisions(app: App) -> list[tuple[str, str, int | None]]:
    async with app.session_factory() as s:
        rows = (await s.scalars(select(ApprovalDecision).order_by(ApprovalDecision.id))).all()
        return [(r.decision, r.tool, r.by_telegram_id) for r in rows]


async def ask_to_post(tg: TG, body: str, chat: int = OWNER, user: int = OWNER) -> Sent:
    """`user` asks, the model calls `post`; the question the bot sends first."""
    tg.llm.add(Calls([("post", {"url": "https://example.org/x", "body": body})]), Text("Done."))
    await tg.send(user, "post it", chat_id=None if chat == user else chat)
    question = await tg.reply(chat)
    assert question.reply_markup, question.text
    return question


async def test_allowed_once_runs_it_and_asks_again_next_time(tg: TG) -> None:
    posted: list[str] = []
    with_post_tool(tg.app, posted)
    question = await ask_to_post(tg, f"hello with {SECRET}")
    assert "https://example.org/x" in question.text and "writes internet" in question.text
    assert SECRET not in question.text and "[secret]" in question.text
    assert [b["text"] for b in question.reply_markup["inline_keyboard"][0]] == [
        "Allow once", "Always (in chats)", "Deny",
    ]  # fmt: skip
    assert posted == []  # nothing runs before the answer
    await tg.press(OWNER, button(question, "Allow once"))
    assert (await tg.reply(OWNER)).text == "Done."
    assert posted == [f"hello with {SECRET}"]
    assert tool_result(tg.llm.requests[1]).startswith("posted")
    assert "Allowed once" in question.text  # the question now says what happened
    assert await decisions(tg.app) == [("once", "post", OWNER)]
    again = await ask_to_post(tg, "again")  # once is once
    await tg.press(OWNER, button(again, "Deny"))
    assert (await tg.reply(OWNER)).text == "Done."
    assert posted == [f"hello with {SECRET}"]


async def test_denied_tells_the_model_and_runs_nothing(tg: TG) -> None:
    posted: list[str] = []
    with_post_tool(tg.app, posted)
    question = await ask_to_post(tg, "spam")
    await tg.press(OWNER, button(question, "Deny"))
    assert (await tg.reply(OWNER)).text == "Done."
    assert posted == [] and tool_result(tg.llm.requests[1]) == DENIED
    assert await decisions(tg.app) == [("denied", "post", OWNER)]


async def test_no_answer_in_time_is_a_no(make_tg: Callable[..., Awaitable[TG]]) -> None:
    tg = await make_tg()
    tg.app.part(APPROVALS).timeout_s = 0.3  # the constant's 120 s, shortened for the test
    posted: list[str] = []
    with_post_tool(tg.app, posted)
    question = await ask_to_post(tg, "late")
    allow = button(question, "Allow once")  # the outcome's edit takes the buttons away
    assert (await tg.reply(OWNER)).text == "Done."
    assert posted == [] and "did not answer" in tool_result(tg.llm.requests[1])
    await tg.server.wait_for(lambda: "No answer in time" in question.text)
    assert await decisions(tg.app) == [("timeout", "post", None)]
    await tg.press(OWNER, allow, message_id=question.message_id)  # too late: nothing happens
    await tg.idle()
    assert posted == [] and tg.unread(OWNER) == []


async def test_always_then_revoked_with_approvals(tg: TG) -> None:
    posted: list[str] = []
    with_post_tool(tg.app, posted)
    question = await ask_to_post(tg, "first")
    await tg.press(OWNER, button(question, "Always"))
    assert (await tg.reply(OWNER)).text == "Done."
    tg.llm.add(Calls([("post", {"url": "https://example.org/x", "body": "second"})]), Text("Ok."))
    await tg.send(OWNER, "post again")
    assert (await tg.reply(OWNER)).text == "Ok."  # no question this time
    assert posted == ["first", "second"]

    await tg.send(OWNER, "/approvals")
    listing = await tg.reply(OWNER)
    assert "• post" in listing.text
    await tg.press(OWNER, button(listing, "Revoke post"))
    await tg.server.wait_for(lambda: "allowed no tool" in listing.text)  # the list, anew
    after = listing
    assert "allowed no tool" in after.text and not after.reply_markup
    third = await ask_to_post(tg, "third")  # asks again
    await tg.press(OWNER, button(third, "Deny"))
    assert (await tg.reply(OWNER)).text == "Done."
    assert posted == ["first", "second"]
    assert [d for d, _, _ in await decisions(tg.app)] == ["always", "revoked", "denied"]


async def test_in_a_group_only_the_member_who_asked_answers_and_grants_stay_theirs(
    make_tg: Callable[..., Awaitable[TG]],
) -> None:
    tg = await make_tg(group_replies="all")
    posted: list[str] = []
    with_post_tool(tg.app, posted)
    group, other = -100777, 2001
    question = await ask_to_post(tg, "from the group", chat=group)
    await tg.press(other, button(question, "Allow once"), chat_id=group)

    def toasts() -> list[str]:
        calls = tg.server.calls
        return [c.params.get("text", "") for c in calls if c.method == "answerCallbackQuery"]

    await tg.server.wait_for(lambda: NOT_YOURS in toasts())
    assert posted == [] and tg.unread(group) == [] and "Allowed" not in question.text
    await tg.press(OWNER, button(question, "Always"), chat_id=group)
    assert (await tg.reply(group)).text == "Done."
    assert posted == ["from the group"]
    # The other member is asked: OWNER's grant is OWNER's.
    theirs = await ask_to_post(tg, "the other member's", chat=group, user=other)
    await tg.press(other, button(theirs, "Deny"), chat_id=group)
    assert (await tg.reply(group)).text == "Done."
    assert posted == ["from the group"]
    assert await decisions(tg.app) == [("always", "post", OWNER), ("denied", "post", other)]


async def test_a_scheduled_task_asks_before_running_code_and_waits(tg: TG) -> None:
    posted: list[str] = []
    with_post_tool(tg.app, posted, "execution")  # like code without network access
    tg.llm.add(Calls([("post", {"url": "u", "body": "from chat"})]), Text("Ran."))
    await tg.send(OWNER, "run it")
    assert (await tg.reply(OWNER)).text == "Ran."  # in a chat the user is watching: no question
    env = make_env(tg, datetime(2026, 11, 20, 5, 0, tzinfo=UTC))
    user = await env.user(OWNER, "Europe/Berlin")
    await env.job(user, "Europe/Berlin", "crunch", kind="task", at="2026-11-20 07:00")
    tg.llm.add(Calls([("post", {"url": "u", "body": "from the task"})]), Text("Crunched."))
    tick = asyncio.create_task(env.tick_at(datetime(2026, 11, 20, 6, 0, tzinfo=UTC)))
    question = await tg.reply(OWNER)  # the task waits for the answer
    assert "from the task" in question.text and posted == ["from chat"]
    await tg.press(OWNER, button(question, "Allow once"))
    assert "Crunched." in await asyncio.wait_for(tick, 60)
    assert posted == ["from chat", "from the task"]


async def test_a_press_another_worker_receives_settles_the_question(tg: TG) -> None:
    posted: list[str] = []
    with_post_tool(tg.app, posted)
    question = await ask_to_post(tg, "via another worker")
    data = button(question, "Allow once")
    assert data.startswith("approvals:answer:")
    key = int(data.split(":")[2])
    sf, clock = tg.app.session_factory, tg.app.deps.clock  # what another worker's press does
    assert await answer(sf, clock, key, 2001, "once") == NOT_YOURS
    assert await answer(sf, clock, key, OWNER, "once") == "✅ Allowed once."
    assert (await tg.reply(OWNER)).text == "Done."  # the asking worker saw it in the database
    assert posted == ["via another worker"]
    assert await answer(sf, clock, key, OWNER, "deny") == CLOSED


async def test_buttons_sent_before_approvals_was_a_feature_still_answer(tg: TG) -> None:
    """A question the previous version asked ("appr:<question>:<choice>", perhaps pressed
    after a newer worker took over) and its /approvals list ("apprv:<grant>")."""
    posted: list[str] = []
    with_post_tool(tg.app, posted)

    def toasts() -> list[str]:
        calls = tg.server.calls
        return [c.params.get("text", "") for c in calls if c.method == "answerCallbackQuery"]

    question = await ask_to_post(tg, "old question")
    key = int(button(question, "Always").split(":")[2])
    await tg.press(OWNER, f"appr:{key}:always", message_id=question.message_id)
    assert (await tg.reply(OWNER)).text == "Done."
    assert posted == ["old question"] and "Allowed, now and from now on" in question.text
    await tg.send(OWNER, "/approvals")
    listing = await tg.reply(OWNER)
    grant = int(button(listing, "Revoke post").split(":")[2])
    await tg.press(OWNER, f"apprv:{grant}", message_id=listing.message_id)
    after = await tg.reply(OWNER)  # as these buttons did: the list anew, in a message
    assert "allowed no tool" in after.text and not after.reply_markup
    assert "Revoked: post asks again." in toasts()
    assert [d for d, _, _ in await decisions(tg.app)] == ["always", "revoked"]


async def test_a_waiting_question_does_not_freeze_the_chat(tg: TG) -> None:
    """Commands are answered while the question waits; the first message meanwhile hears
    at once why it waits, and is answered right after the question, in order."""
    posted: list[str] = []
    with_post_tool(tg.app, posted)
    question = await ask_to_post(tg, "x")
    await tg.send(OWNER, "/help")
    assert "/memory" in (await tg.reply(OWNER)).text  # at once, the question still open
    await tg.send(OWNER, "and another thing")
    assert (await tg.reply(OWNER)).text == WAITS_FOR_QUESTION
    await tg.send(OWNER, "and a third")  # told once per question: no second notice
    await tg.send(OWNER, "/approvals")
    assert (await tg.reply(OWNER)).text.startswith("Approvals: risky")
    assert posted == [] and "Allowed" not in question.text
    await tg.press(OWNER, button(question, "Allow once"))
    answers = [m.text for m in await tg.replies(OWNER, 3)]
    assert answers == ["Done.", "echo: and another thing", "echo: and a third"]
    assert posted == ["x"]
