"""Removing someone from /users stops everything of theirs, through the assembled app on the
fake Telegram: their reminders and scheduled tasks neither run nor deliver (no model call,
nothing spent), a task computing at that moment stops, and a question waiting for their
press closes at once."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

from sqlalchemy import select

from bot.access.gate import ACCESS
from bot.access.turns import STOPPED
from bot.approvals.models import ApprovalDecision
from bot.checkins.runs import tick as checkins_tick
from db.repos import core as core_repo
from tests.e2e.conftest import OWNER, STRANGER, TG
from tests.e2e.test_access_e2e import GROUP, deliveries, named
from tests.e2e.test_approvals_e2e import button, with_post_tool
from tests.fakes.openai_server import Calls, Text
from tests.polling import until
from tools.reminders import jobs
from tools.reminders.firing import NOT_LET_IN, REMINDERS
from tools.reminders.models import JobRun, ScheduledJob
from tools.reminders.times import Spec


async def let_in(tg: TG) -> None:
    await tg.send(STRANGER, "let me in", **named(STRANGER, "Mallory"))
    await tg.reply(STRANGER)
    await tg.reply(OWNER)
    await tg.press(OWNER, f"access:allow:{STRANGER}")
    await tg.reply(STRANGER)
    await tg.idle()


async def remove(tg: TG) -> None:
    await tg.send(OWNER, "/users")
    await tg.reply(OWNER)
    await tg.press(OWNER, f"access:remove:{STRANGER}")


async def due_now(tg: TG, kind: str, text: str) -> int:
    """A job of the stranger's, hourly, due now: its id."""
    now = datetime.now(UTC).replace(microsecond=0)
    async with tg.app.session_factory() as s, s.begin():
        user = await core_repo.get_or_create_user(s, STRANGER, "Mallory", now)
    spec = Spec("every", ZoneInfo("UTC"), first=now - timedelta(seconds=30), every_s=3600)
    job = await jobs.create(tg.app.session_factory, user_id=user.id, kind=kind, text=text,
                            words="", spec=spec, now=now - timedelta(minutes=1))  # fmt: skip
    return job.id


async def runs(tg: TG) -> list[tuple[str, str | None]]:
    async with tg.app.session_factory() as s:
        rows = (await s.scalars(select(JobRun).order_by(JobRun.id))).all()
        return [(r.status, r.error) for r in rows]


async def test_a_removed_persons_reminders_and_tasks_neither_run_nor_deliver(tg: TG) -> None:
    await deliveries(tg)
    await let_in(tg)
    await due_now(tg, "task", "summarise the news")
    await due_now(tg, "reminder", "water the plants")
    await remove(tg)
    await tg.idle()
    seen = len(tg.server.sent_to(STRANGER))
    reminders = tg.app.part(REMINDERS)
    await reminders.tick()
    await reminders.idle()
    assert tg.llm.requests == []  # the task did not run: nothing spent
    assert len(tg.server.sent_to(STRANGER)) == seen  # nothing delivered
    assert await runs(tg) == [("skipped", NOT_LET_IN), ("skipped", NOT_LET_IN)]
    async with tg.app.session_factory() as s:  # kept, paused, for a return
        states = (await s.execute(select(ScheduledJob.status, ScheduledJob.paused_reason))).all()
    assert [tuple(r) for r in states] == [("paused", "removed")] * 2


async def test_a_task_computing_when_its_person_is_removed_stops(tg: TG) -> None:
    await deliveries(tg)
    await let_in(tg)
    slow = asyncio.Event()
    tg.llm.add(Text("the news, summarised", after=slow))
    await due_now(tg, "task", "summarise the news")
    reminders = tg.app.part(REMINDERS)
    await reminders.tick()

    async def asked() -> bool:
        return len(tg.llm.requests) == 1

    await until(asked, "the task computing")
    await remove(tg)

    async def stopped() -> bool:
        return await runs(tg) == [("skipped", NOT_LET_IN)]

    await until(stopped, "the task stopped")
    slow.set()
    await reminders.idle()
    await tg.idle()
    assert all("summarised" not in m.text for m in tg.server.sent_to(STRANGER))


async def test_a_removed_persons_open_question_closes(tg: TG) -> None:
    await deliveries(tg)
    await let_in(tg)
    posted: list[str] = []
    with_post_tool(tg.app, posted)
    tg.llm.add(Calls([("post", {"url": "https://example.org/x", "body": "hi"})]), Text("Done."))
    await tg.send(STRANGER, "post it")
    question = await tg.reply(STRANGER)
    assert button(question, "Allow once")
    await remove(tg)
    await tg.server.wait_for(lambda: "Closed" in question.text)
    assert (await tg.reply(STRANGER)).text == STOPPED  # not the model's "Done."
    await tg.idle()
    assert posted == [] and len(tg.llm.requests) == 1  # nothing more spent on them
    async with tg.app.session_factory() as s:
        closed = (await s.scalars(select(ApprovalDecision.decision))).all()
    assert closed == ["closed"]


async def test_a_person_let_in_again_after_a_removal_is_answered(tg: TG) -> None:
    """The removal marks the chat's requests for good (tools/hooks.py Marks); once the owner
    lets the person in again, their turns are not stopped."""
    await deliveries(tg)
    await let_in(tg)
    await remove(tg)
    await tg.idle()
    # The dashboard's Allow (/users lists no one removed; they wait a day to ask again).
    await tg.app.part(ACCESS).decide(STRANGER, "allowed", OWNER, datetime.now(UTC))
    await tg.reply(STRANGER)  # told they are let in
    await tg.idle()
    tg.llm.add(Text("welcome back"))
    await tg.send(STRANGER, "hello again")
    assert (await tg.reply(STRANGER)).text == "welcome back"


async def admitted_group(tg: TG) -> None:
    """A stranger's mention in GROUP, the owner's Allow for the group, as people do it."""
    await deliveries(tg)
    await tg.send(STRANGER, "@sidekick_test_bot hi all", chat_id=GROUP)
    await tg.reply(GROUP)
    await tg.reply(OWNER)
    await tg.press(OWNER, f"access:allow:{GROUP}")
    await tg.reply(GROUP)


async def test_a_removed_groups_open_question_closes_and_its_turn_stops(tg: TG) -> None:
    await admitted_group(tg)
    await tg.idle()
    posted: list[str] = []
    with_post_tool(tg.app, posted)
    tg.llm.add(Calls([("post", {"url": "https://example.org/x", "body": "hi"})]), Text("Done."))
    await tg.send(667, "@sidekick_test_bot post it", chat_id=GROUP)
    question = await tg.reply(GROUP)
    assert button(question, "Allow once")
    await tg.send(OWNER, "/users")
    await tg.reply(OWNER)
    await tg.press(OWNER, f"access:remove:{GROUP}")
    await tg.server.wait_for(lambda: "Closed" in question.text)
    assert (await tg.reply(GROUP)).text == STOPPED
    await tg.idle()
    assert posted == [] and len(tg.llm.requests) == 1


async def test_a_removed_person_gets_no_check_in(tg: TG) -> None:
    await deliveries(tg)
    await let_in(tg)
    await tg.send(STRANGER, "/checkins on")
    assert "Check-ins: on" in (await tg.reply(STRANGER)).text
    await remove(tg)
    await tg.idle()
    seen = len(tg.server.sent_to(STRANGER))
    brief = datetime.combine(datetime.now(UTC).date(), time(8, 31), UTC)  # UTC is their zone
    assert await checkins_tick(tg.app, brief) == []
    assert tg.llm.requests == [] and len(tg.server.sent_to(STRANGER)) == seen


async def test_a_removed_group_gets_no_brief(tg: TG) -> None:
    """A group's morning brief, asked for there by a member the group's admission lets in:
    once the owner removes the group, it is not computed nor sent."""
    await admitted_group(tg)
    await tg.send(667, "/checkins on", chat_id=GROUP)
    assert "Check-ins in this group: on" in (await tg.reply(GROUP)).text
    await tg.send(OWNER, "/users")
    await tg.reply(OWNER)
    await tg.press(OWNER, f"access:remove:{GROUP}")
    await tg.idle()
    seen, asked = len(tg.server.sent_to(GROUP)), len(tg.llm.requests)
    brief = datetime.combine(datetime.now(UTC).date(), time(8, 31), UTC)  # UTC is their zone
    assert await checkins_tick(tg.app, brief) == []
    await tg.idle()
    assert len(tg.llm.requests) == asked and len(tg.server.sent_to(GROUP)) == seen
