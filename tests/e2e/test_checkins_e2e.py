"""Check-ins through the assembled app on the fake Telegram and model: off until the person
turns them on; the brief arrives at its time in the person's zone, never in quiet hours; a
run with nothing to say sends nothing; "stop" stops; the daily cap and the budget stop a run
before its model call; a restart at brief time sends one brief."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

from sqlalchemy import select

from bot.checkins.models import CheckinRun
from bot.checkins.runs import tick
from bot.sessions import repo as sessions_repo
from bot.telegram.delivery import TelegramDelivery
from db.models.core import User
from tests.e2e.conftest import OWNER, TG
from tests.fakes.openai_server import Calls, Text
from tests.test_usage import usage
from tools.reminders.tool import NOT_IN_GROUP

# Today (the app's clock is the real one: /checkins sums this month's runs): brief time in
# New York whatever its offset today, and 08:31 in UTC.
TODAY = datetime.now(UTC).date()
NY_0730 = datetime.combine(TODAY, time(7, 30), ZoneInfo("America/New_York")).astimezone(UTC)
UTC_0831 = datetime.combine(TODAY, time(8, 31), UTC)
SECRET = {"action": "create", "text": "buy the surprise party cake", "in_minutes": 600}


async def _started(tg: TG) -> None:
    await tg.app.start_features(TelegramDelivery(tg.runtime.outbox))  # as `sidekick run` does


async def _command(tg: TG, text: str) -> str:
    await tg.send(OWNER, text)
    return (await tg.reply(OWNER)).text


async def _zone(tg: TG, tz: str) -> None:
    async with tg.app.session_factory() as s, s.begin():
        user = (await s.execute(select(User).where(User.telegram_id == OWNER))).scalar_one()
        await sessions_repo.set_user_timezone(s, user.id, tz)


async def _statuses(tg: TG) -> list[tuple[str, str]]:
    async with tg.app.session_factory() as s:
        rows = (await s.execute(select(CheckinRun).order_by(CheckinRun.id))).scalars()
        return [(r.slot, r.status) for r in rows]


async def test_the_brief_comes_at_its_time_in_the_persons_zone_and_stop_stops(tg: TG) -> None:
    await _started(tg)
    assert "Check-ins: off" in await _command(tg, "/checkins")
    assert await tick(tg.app, NY_0730 + timedelta(minutes=1)) == []  # off by default

    assert "Check-ins: on" in await _command(tg, "/checkins on")
    await _zone(tg, "America/New_York")
    refused = await _command(tg, "/checkins at 07:30")
    assert "07:30 is inside your quiet hours (22:00-08:00)" in refused
    await _command(tg, "/checkins quiet 22:00-07:00")
    shown = await _command(tg, "/checkins at 07:30")
    assert "Morning brief at 07:30, a follow-up at 13:30 (America/New_York)" in shown
    assert "Quiet hours: 22:00-07:00" in shown and "At most 2 a day" in shown

    asked = len(tg.llm.requests)
    # 07:30 UTC is 02:30 or 03:30 in New York: quiet hours there, not the brief's time.
    assert await tick(tg.app, datetime.combine(TODAY, time(7, 30), UTC)) == []
    assert await tick(tg.app, NY_0730 - timedelta(minutes=1)) == []
    assert len(tg.llm.requests) == asked

    tg.llm.add(Text("Call the dentist today, as you said yesterday."))
    [done] = await tick(tg.app, NY_0730 + timedelta(minutes=1))
    assert (done.slot, done.status) == ("brief", "sent")
    brief = await tg.reply(OWNER)
    assert brief.text == "Call the dentist today, as you said yesterday."
    labels = [b["text"] for b in brief.reply_markup["inline_keyboard"][0]]
    assert labels == ["👍 useful", "less of this", "stop"]
    prompt = tg.llm.requests[-1]["messages"][-1]["content"]
    assert "morning brief" in prompt and "answer exactly NOTHING" in prompt

    # The follow-up finds nothing worth saying: the model is asked, nothing is sent.
    tg.llm.add(Text("NOTHING"))
    [done] = await tick(tg.app, NY_0730 + timedelta(hours=6, minutes=2))
    assert (done.slot, done.status) == ("followup", "nothing")
    await tg.idle()
    assert tg.unread(OWNER) == []

    await tg.press(OWNER, brief.reply_markup["inline_keyboard"][0][0]["callback_data"])
    await tg.idle()
    await tg.press(OWNER, "checkins:stop", message_id=brief.message_id)
    await tg.idle()
    shown = await _command(tg, "/checkins")
    assert "Check-ins: off" in shown and "Your answers: 1 useful, 0 less of this" in shown
    asked = len(tg.llm.requests)
    assert await tick(tg.app, NY_0730 + timedelta(days=1, minutes=1)) == []
    assert len(tg.llm.requests) == asked


async def test_the_daily_cap_stops_a_run_before_its_model_call(
    make_tg: Callable[..., Awaitable[TG]],
) -> None:
    tg = await make_tg(prices="fake-model=1/2")
    await _started(tg)
    await _command(tg, "/checkins on")
    await _zone(tg, "UTC")
    assert "At most 1 a day" in await _command(tg, "/checkins max 1")
    tg.llm.add(Text("Two tasks are due today.", usage=usage(1000, 100)))
    [done] = await tick(tg.app, UTC_0831)
    assert done.status == "sent"
    await tg.reply(OWNER)
    asked = len(tg.llm.requests)
    [done] = await tick(tg.app, UTC_0831 + timedelta(hours=6))
    assert (done.slot, done.status) == ("followup", "capped")
    assert len(tg.llm.requests) == asked  # stopped before the model was asked
    shown = await _command(tg, "/checkins")
    assert "stopped before the model call: 1 by the daily cap" in shown
    # The brief's model call, metered as a scheduled request: $0.001 in + $0.0002 out.
    assert "cost: $0.0012 this month over 1 sent, 0 with nothing to say" in shown


async def test_the_budget_stops_a_run_before_its_model_call(
    make_tg: Callable[..., Awaitable[TG]],
) -> None:
    tg = await make_tg(prices="fake-model=1/2", budget_usd="0.001/day")
    await _started(tg)
    await _command(tg, "/checkins on")
    await _zone(tg, "UTC")
    tg.llm.add(Text("spent", usage=usage(1200, 300)))  # $0.0018: today's budget is gone
    assert (await _command(tg, "what is up")).startswith("spent")
    asked = len(tg.llm.requests)
    [done] = await tick(tg.app, UTC_0831)
    assert done.status == "budget"
    assert len(tg.llm.requests) == asked
    await tg.idle()
    assert tg.unread(OWNER) == []  # nothing sent; /checkins says why
    assert "1 by the budget" in await _command(tg, "/checkins")


async def test_a_run_that_would_pass_the_budget_stops_before_its_model_call(
    make_tg: Callable[..., Awaitable[TG]],
) -> None:
    tg = await make_tg(prices="fake-model=1/2", budget_usd="0.002/day")
    await _started(tg)
    await _command(tg, "/checkins on")
    await _zone(tg, "UTC")
    tg.llm.add(Text("The report is due at noon.", usage=usage(1000, 100)))  # $0.0012
    [done] = await tick(tg.app, UTC_0831)
    assert done.status == "sent"
    await tg.reply(OWNER)
    asked = len(tg.llm.requests)
    # $0.0008 left, and a check-in costs $0.0012: the follow-up is not started.
    [done] = await tick(tg.app, UTC_0831 + timedelta(hours=6))
    assert (done.slot, done.status) == ("followup", "budget")
    assert len(tg.llm.requests) == asked
    async with tg.app.session_factory() as s:
        run = (await s.execute(select(CheckinRun).order_by(CheckinRun.id.desc()))).scalars()
        assert "less than a check-in costs ($0.0012 last time)" in (next(run).note or "")


async def test_a_restart_at_brief_time_sends_one_brief(tg: TG) -> None:
    await _started(tg)
    await _command(tg, "/checkins on")
    await _zone(tg, "UTC")
    tg.llm.add(Text("Good morning: the report is due at noon."))
    [done] = await tick(tg.app, UTC_0831)
    assert done.status == "sent"
    assert (await tg.reply(OWNER)).text == "Good morning: the report is due at noon."
    await tg.restart()
    await _started(tg)
    asked = len(tg.llm.requests)
    # The start-up catch-up and the next minute's tick both find the morning's slot taken.
    assert [o.status for o in await tick(tg.app, UTC_0831 + timedelta(minutes=1))] == ["taken"]
    assert [o.status for o in await tick(tg.app, UTC_0831 + timedelta(minutes=2))] == ["taken"]
    assert len(tg.llm.requests) == asked
    await tg.idle()
    assert tg.unread(OWNER) == []
    assert await _statuses(tg) == [("brief", "sent")]


async def test_a_failed_run_is_told_once_and_not_retried(tg: TG) -> None:
    await _started(tg)
    await _command(tg, "/checkins on")
    await _zone(tg, "UTC")
    tg.llm.failing = 500
    try:
        [done] = await tick(tg.app, UTC_0831)
        assert done.status == "failed"
        notice = await tg.reply(OWNER)
        assert notice.text.startswith("⚠️ Your check-in could not run:")
        asked = len(tg.llm.requests)
        # The same slot is not tried again; the next day's failure is not told again.
        assert [o.status for o in await tick(tg.app, UTC_0831 + timedelta(minutes=5))] == ["taken"]
        assert len(tg.llm.requests) == asked
        [done] = await tick(tg.app, UTC_0831 + timedelta(days=1))
        assert done.status == "failed"
        await tg.idle()
        assert tg.unread(OWNER) == []
    finally:
        tg.llm.failing = None
    assert await _statuses(tg) == [("brief", "failed"), ("brief", "failed")]


GROUP, QUIET_GROUP = -100777, -100778


async def _in(tg: TG, chat: int, text: str, user: int = OWNER) -> str:
    await tg.send(user, text, chat_id=chat)
    return (await tg.reply(chat)).text


async def test_a_group_gets_a_brief_only_when_a_member_asked_for_it_there(tg: TG) -> None:
    await _started(tg)
    # The owner's private reminder: a group's check-in never lists it.
    tg.llm.add(Calls([("schedule", SECRET)]), Text("ok"))
    await tg.send(OWNER, "remind me about the surprise party")
    await tg.reply(OWNER)
    await _zone(tg, "UTC")
    # People talk to the bot in another group; nobody asks for check-ins there.
    await tg.send(OWNER, "@sidekick_test_bot hello", chat_id=QUIET_GROUP)
    await tg.reply(QUIET_GROUP)

    shown = await _in(tg, GROUP, "/checkins")
    assert shown.startswith("Check-ins in this group: off")
    shown = await _in(tg, GROUP, "/checkins on")
    assert "Check-ins in this group: on, asked for by Tester" in shown
    assert "Morning brief at 08:30 (UTC)" in shown and "(22:00-08:00)" in shown
    assert "cost" not in shown  # the member's own figures stay private
    refused = await _in(tg, GROUP, "/checkins at 07:00")
    assert "07:00 is inside your quiet hours (22:00-08:00)" in refused  # the member's
    assert "Check-ins: off" in await _command(tg, "/checkins")  # their own stay off

    asked = len(tg.llm.requests)
    assert await tick(tg.app, UTC_0831 - timedelta(minutes=2)) == []
    assert len(tg.llm.requests) == asked
    tg.llm.add(
        Calls([("schedule", {"action": "list"})]),
        Text("Today: the group's hike starts at noon."),
    )
    [done] = await tick(tg.app, UTC_0831)
    assert (done.chat_id, done.slot, done.status) == (GROUP, "brief", "sent")
    brief = await tg.reply(GROUP)
    assert brief.text == "Today: the group's hike starts at noon."
    labels = [b["text"] for b in brief.reply_markup["inline_keyboard"][0]]
    assert labels == ["👍 useful", "less of this", "stop"]
    body = tg.llm.requests[-1]
    assert "this group's short morning brief" in body["messages"][-3]["content"]
    listed = [m["content"] for m in body["messages"] if m["role"] == "tool"][-1]
    assert listed == NOT_IN_GROUP
    assert "surprise party" not in json.dumps(body["messages"])

    # Once a morning, also after a restart; nothing in the private chat or the other group.
    await tg.restart()
    await _started(tg)
    asked = len(tg.llm.requests)
    assert [o.status for o in await tick(tg.app, UTC_0831 + timedelta(minutes=1))] == ["taken"]
    assert len(tg.llm.requests) == asked
    await tg.idle()
    assert tg.unread(OWNER) == [] and tg.unread(GROUP) == [] and tg.unread(QUIET_GROUP) == []
    assert not any("brief" in m.text or "hike" in m.text for m in tg.server.sent_to(QUIET_GROUP))
    assert "cost: $0.0000 this month over 1 sent" in await _command(tg, "/checkins")

    # Another member there presses stop: the group's brief stops, the next day sends nothing.
    await tg.press(2001, "checkins:stop", message_id=brief.message_id, chat_id=GROUP)
    await tg.idle()
    assert (await _in(tg, GROUP, "/checkins", 2001)).startswith("Check-ins in this group: off")
    assert await tick(tg.app, UTC_0831 + timedelta(days=1)) == []
    assert len(tg.llm.requests) == asked


async def test_a_groups_brief_is_stopped_by_the_members_budget(
    make_tg: Callable[..., Awaitable[TG]],
) -> None:
    tg = await make_tg(prices="fake-model=1/2", budget_usd="0.001/day")
    await _started(tg)
    tg.llm.add(Text("spent", usage=usage(1200, 300)))  # $0.0018: the member's day is gone
    assert (await _command(tg, "what is up")).startswith("spent")
    await _zone(tg, "UTC")
    assert "on, asked for by Tester" in await _in(tg, GROUP, "/checkins on")
    asked = len(tg.llm.requests)
    [done] = await tick(tg.app, UTC_0831)
    assert (done.chat_id, done.status) == (GROUP, "budget")
    assert len(tg.llm.requests) == asked  # stopped before the model call
    await tg.idle()
    assert tg.unread(GROUP) == [] and tg.unread(OWNER) == []
    assert "1 by the budget" in await _command(tg, "/checkins")
