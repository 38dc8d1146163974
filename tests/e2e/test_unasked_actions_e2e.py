"""Actions the person did not ask for (issue 46 item 7), through the assembled app: asked to
suggest a dinner, the 1.5B model created a reminder nobody wanted (reply 23 of the day in
/work/shared/fixtures/llm/qwen2.5-coder-1.5b-day-2026-12-06/calls.jsonl: a fenced `schedule`
call). It is not created and the
model is told to ask first; a reminder the person asks for, or agrees to when offered, is."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from sqlalchemy import select

from bot.sessions.lifecycle import NOT_ASKED
from db.models.core import ChatSession
from tests.e2e.conftest import OWNER, TG
from tests.e2e.test_approvals_e2e import button
from tests.fakes.openai_server import FakeOpenAI, Text
from tools.reminders.asked import ASK_FIRST, NOT_STOPPED
from tools.reminders.models import ScheduledJob

UNASKED = (  # recorded (23), the time moved to one that is always ahead
    '```json\n{\n  "name": "schedule",\n  "arguments": {\n    "kind": "reminder",\n'
    '    "text": "I want to try making some quick dinner tonight.",\n'
    '    "when": "in 30 minutes",\n    "in_minutes": 30\n  }\n}\n```'
)


async def jobs(tg: TG) -> list[str]:
    async with tg.app.session_factory() as s:
        return list((await s.execute(select(ScheduledJob.text))).scalars())


async def tool_results(tg: TG) -> list[str]:
    return [m["content"] for m in tg.llm.requests[-1]["messages"] if m["role"] == "tool"]


async def test_a_reminder_nobody_asked_for_is_not_created(tg: TG) -> None:
    tg.llm.add(Text(UNASKED), Text("Try a quick pasta. Want a reminder to start at 19:00?"))
    await tg.send(OWNER, "Can you suggest a quick dinner I could make tonight?")
    assert (await tg.reply(OWNER)).text.startswith("Try a quick pasta.")
    await tg.idle()
    assert await jobs(tg) == []
    assert (await tool_results(tg))[-1] == ASK_FIRST

    # The person agrees to the offer: now it is created.
    tg.llm.add(Text(UNASKED), Text("Done."))
    await tg.send(OWNER, "Yes please.")
    assert (await tg.reply(OWNER)).text.startswith("Done.")
    assert await jobs(tg) == ["I want to try making some quick dinner tonight."]


async def test_a_reminder_the_person_asks_for_is_created(tg: TG) -> None:
    tg.llm.add(Text(UNASKED), Text("I will remind you."))
    await tg.send(OWNER, "Remind me in 30 minutes that I want to try making a quick dinner.")
    assert (await tg.reply(OWNER)).text.startswith("I will remind you.")
    assert await jobs(tg) == ["I want to try making some quick dinner tonight."]


async def test_what_the_assistant_created_is_shown_with_an_undo_button(tg: TG) -> None:
    tg.llm.add(Text(UNASKED), Text("I will remind you."))
    await tg.send(OWNER, "Remind me in 30 minutes that I want to try making a quick dinner.")
    reply = await tg.reply(OWNER)
    assert reply.text == "I will remind you."
    assert reply.reply_markup is not None
    (row,) = reply.reply_markup["inline_keyboard"]
    assert row == [{"text": "↩ Undo #1", "callback_data": "reminders:undo:1"}]

    await tg.press(OWNER, "reminders:undo:1", reply.message_id)
    await tg.idle()
    async with tg.app.session_factory() as s:
        assert list((await s.execute(select(ScheduledJob.status))).scalars()) == ["cancelled"]
    answers = [c.params for c in tg.server.calls if c.method == "answerCallbackQuery"]
    assert answers[-1].get("text") == "↩ Undone: #1 is cancelled."
    # An answer that created nothing has no button.
    tg.llm.add(Text("Hello."))
    await tg.send(OWNER, "Hi")
    assert (await tg.reply(OWNER)).reply_markup is None


async def test_with_a_small_model_a_reminder_asked_for_is_put_to_the_person_first(
    make_tg: Callable[..., Awaitable[TG]], fake_llm: FakeOpenAI
) -> None:
    """Issue 46 item 7: the server says the model is small (llama-server's model list,
    `meta.n_params` 1,777,088,000: the recorded day's Qwen2.5-Coder-1.5B), so even a reminder
    the message asked for waits for the person's press; Deny creates nothing, Allow creates
    it. A bigger model's (7B) is created at once."""
    fake_llm.n_params = 1_777_088_000
    tg = await make_tg()
    asked = "Remind me in 30 minutes that I want to try making a quick dinner."
    tg.llm.add(Text(UNASKED), Text("Not set."))
    await tg.send(OWNER, asked)
    question = await tg.reply(OWNER)
    assert "may I do this" in question.text and "schedule" in question.text, question.text
    assert "quick dinner tonight" in question.text
    await tg.press(OWNER, button(question, "Deny"))
    assert (await tg.reply(OWNER)).text == "Not set."
    assert await jobs(tg) == []

    tg.llm.add(Text(UNASKED), Text("I will remind you."))
    await tg.send(OWNER, asked)
    question = await tg.reply(OWNER)
    await tg.press(OWNER, button(question, "Allow once"))
    assert (await tg.reply(OWNER)).text == "I will remind you."
    assert await jobs(tg) == ["I want to try making some quick dinner tonight."]


async def test_a_call_the_tool_would_refuse_is_never_put_to_the_person(
    make_tg: Callable[..., Awaitable[TG]], fake_llm: FakeOpenAI
) -> None:
    """Held, the real tier's 0.5B wrote `when` "2026-12-06 18:55" beside `in_minutes` 30: the
    person allowed it, the tool then refused the two times, and the corrected call was a
    second question nobody answered. The tool's own checks come first: the contradiction
    goes back to the model unasked, and only the call the tool takes is put to the person."""
    fake_llm.n_params = 494_032_768
    tg = await make_tg()
    two_times = (
        '{"name": "schedule", "arguments": {"action": "create", "text": "call Ana", '
        '"when": "tomorrow at 09:00", "in_minutes": 30}}'
    )
    one_time = (
        '{"name": "schedule", "arguments": {"action": "create", "text": "call Ana", '
        '"when": "in 30 minutes", "in_minutes": 30}}'
    )
    tg.llm.add(Text(two_times), Text(one_time), Text("I will remind you."))
    await tg.send(OWNER, "Remind me in 30 minutes to call Ana.")
    question = await tg.reply(OWNER)
    assert "may I do this" in question.text and "in 30 minutes" in question.text, question.text
    refused = [m["content"] for m in tg.llm.requests[-1]["messages"] if m["role"] == "tool"]
    assert len(refused) == 1 and "read as" in refused[0], refused
    await tg.press(OWNER, button(question, "Allow once"))
    assert (await tg.reply(OWNER)).text == "I will remind you."
    assert await jobs(tg) == ["call Ana"]
    asked = [m for m in tg.server.sent_to(OWNER) if "may I do this" in (m.text or "")]
    assert len(asked) == 1, [m.text for m in asked]


async def test_with_a_bigger_model_a_reminder_asked_for_is_created_at_once(
    make_tg: Callable[..., Awaitable[TG]], fake_llm: FakeOpenAI
) -> None:
    fake_llm.n_params = 7_615_616_512
    tg = await make_tg()
    tg.llm.add(Text(UNASKED), Text("I will remind you."))
    await tg.send(OWNER, "Remind me in 30 minutes that I want to try making a quick dinner.")
    assert (await tg.reply(OWNER)).text == "I will remind you."
    assert await jobs(tg) == ["I want to try making some quick dinner tonight."]


async def statuses(tg: TG) -> list[str]:
    async with tg.app.session_factory() as s:
        return list((await s.execute(select(ScheduledJob.status))).scalars())


async def test_a_cancel_or_pause_nobody_asked_for_stops_nothing(tg: TG) -> None:
    """Issue 46 item 6 (bench/tool_use.py --day, held replies, 2026-12-06): the 1.5B model
    cancelled the laundry reminder when the next message asked nothing of the kind. A
    cancel or pause runs only when the person's message asks for it."""
    tg.llm.add(Text(UNASKED), Text("I will remind you."))
    await tg.send(OWNER, "Remind me in 30 minutes that I want to try making a quick dinner.")
    await tg.reply(OWNER)
    async with tg.app.session_factory() as s:
        (job_id,) = (await s.execute(select(ScheduledJob.id))).scalars()
    for action in ("cancel", "pause"):
        call = f'{{"name": "schedule", "arguments": {{"action": "{action}", "job_id": {job_id}}}}}'
        tg.llm.add(Text(call), Text("Pasta with pesto is quick."))
        await tg.send(OWNER, "What could I cook tonight?")
        assert (await tg.reply(OWNER)).text.startswith("Pasta with pesto")
        await tg.idle()
        assert await statuses(tg) == ["active"]
        assert (await tool_results(tg))[-1] == NOT_STOPPED

    # Asked, it is cancelled.
    call = f'{{"name": "schedule", "arguments": {{"action": "cancel", "job_id": {job_id}}}}}'
    tg.llm.add(Text(call), Text("Cancelled."))
    await tg.send(OWNER, "Cancel that dinner reminder, please.")
    assert (await tg.reply(OWNER)).text.startswith("Cancelled.")
    await tg.idle()
    assert await statuses(tg) != ["active"]


LISTED_AS_CREATE = (  # bench/tool_use.py, "List my reminders.", 1.5B model, 2026-12-06
    '{"name": "schedule", "arguments": {"action": "create", "text": "List my reminders", '
    '"in_minutes": 1}}'
)


async def test_asking_for_the_list_of_reminders_creates_none(tg: TG) -> None:
    """ "List my reminders." names reminders but asks for none: the 1.5B model created one,
    and the gate let it (it took the word "reminders" for asking). Now the model is told to
    ask first, and the list it calls next is what the person reads."""
    tg.llm.add(
        Text(LISTED_AS_CREATE),
        Text('{"name": "schedule", "arguments": {"action": "list"}}'),
        Text("You have no reminders."),
    )
    await tg.send(OWNER, "List my reminders.")
    assert (await tg.reply(OWNER)).text == "You have no reminders."
    await tg.idle()
    assert await jobs(tg) == []
    first, listed = await tool_results(tg)
    assert first == ASK_FIRST and listed.startswith("No reminders")

    # Asked for with the noun and a verb, one is created.
    tg.llm.add(Text(LISTED_AS_CREATE), Text("Set."))
    await tg.send(OWNER, "Please set a reminder to list my reminders.")
    assert (await tg.reply(OWNER)).text == "Set."
    assert await jobs(tg) == ["List my reminders"]


async def sessions(tg: TG) -> list[int]:
    async with tg.app.session_factory() as s:
        return list((await s.execute(select(ChatSession.id).order_by(ChatSession.id))).scalars())


async def test_a_new_session_nobody_asked_for_is_not_started(tg: TG) -> None:
    """Held to one valid call, the 1.5B model called `new_session` (no arguments to get
    wrong) after storing a licence plate, and again after a long message about a trip
    (bench/tool_use.py --day, 2026-12-06): the person's conversation ended unasked. It
    runs only when the message asks for a fresh start."""
    tg.llm.add(Text('{"name": "new_session", "arguments": {}}'), Text("Noted."))
    await tg.send(OWNER, "Please remember that my car's license plate is 42-XP-17.")
    assert (await tg.reply(OWNER)).text == "Noted."
    await tg.idle()
    (first,) = await sessions(tg)
    assert (await tool_results(tg))[-1] == NOT_ASKED

    tg.llm.add(Text("It is 42-XP-17."))
    await tg.send(OWNER, "What's my license plate again?")
    assert (await tg.reply(OWNER)).text == "It is 42-XP-17."
    assert await sessions(tg) == [first]
    earlier = [m["content"] for m in tg.llm.requests[-1]["messages"] if m["role"] == "user"]
    assert any("42-XP-17" in str(c) for c in earlier[:-1])  # the same session goes on

    # Asked, the session ends after the answer.
    tg.llm.add(Text('{"name": "new_session", "arguments": {}}'), Text("Fresh start."))
    await tg.send(OWNER, "Let's start a new conversation.")
    assert (await tg.reply(OWNER)).text == "Fresh start."
    assert len(await sessions(tg)) == 2
