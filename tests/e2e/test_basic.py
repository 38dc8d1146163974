"""Round trip, commands, access control and restarts through the real Dispatcher."""

from __future__ import annotations

from sqlalchemy import select

from bot.agent.prompt import without_context
from db.models import ChatSession, Message
from tests.e2e.conftest import OWNER, STRANGER, TG
from tests.fakes.openai_server import Text


async def test_round_trip(tg: TG) -> None:
    tg.llm.add(Text("Hello **Ann**! 2 < 3 & done"))
    await tg.send(OWNER, "hi there")
    reply = await tg.reply(OWNER)
    assert reply.text == "Hello Ann! 2 < 3 & done"
    assert {"type": "bold", "offset": 6, "length": 3} in reply.entities
    users = [m for m in tg.llm.requests[0]["messages"] if m["role"] == "user"]
    assert without_context(users[-1]["content"]) == "hi there"
    assert any(c.method == "setMyCommands" for c in tg.server.calls)
    names = {c["command"] for c in tg.server.commands}
    assert {"start", "help", "newsession"} <= names


async def test_stranger_gets_one_reply_and_no_model_call(tg: TG) -> None:
    await tg.send(STRANGER, "let me in")
    await tg.send(STRANGER, "please")
    await tg.idle()
    sent = tg.server.sent_to(STRANGER)
    assert len(sent) == 1
    assert f"Your Telegram user id is {STRANGER}" in sent[0].text
    assert f"ALLOWED_USER_IDS={STRANGER}" in sent[0].text
    assert str(OWNER) not in sent[0].text  # never leak who is allowed
    assert tg.llm.requests == []
    async with tg.app.session_factory() as s:
        assert list((await s.execute(select(Message))).scalars()) == []


async def test_stranger_button_press_is_refused(tg: TG) -> None:
    tg.llm.add(Text("hi"))
    await tg.send(OWNER, "hello")
    await tg.reply(OWNER)
    tg.server.messages[-1].reply_markup = {
        "inline_keyboard": [[{"text": "x", "callback_data": "x"}]]
    }
    await tg.press(STRANGER, "x", chat_id=OWNER)
    await tg.idle()
    answers = [c for c in tg.server.calls if c.method == "answerCallbackQuery"]
    assert answers and answers[-1].params.get("text") == "Not allowed."
    assert len(tg.llm.requests) == 1


async def test_start_and_help_list_commands(tg: TG) -> None:
    await tg.send(OWNER, "/start")
    start = await tg.reply(OWNER)
    assert start.text.startswith("Hi Tester!")
    await tg.send(OWNER, "/help")
    help_ = await tg.reply(OWNER)
    for command in ("/start", "/help", "/newsession"):
        assert command in help_.text
    # Each command's arguments right after its name, in one layout.
    assert "/quiet HH:MM-HH:MM — hold reminders back" in help_.text
    assert "/codestats [days] — your code runs" in help_.text
    assert tg.llm.requests == []


async def test_new_is_an_alias_of_newsession(tg: TG) -> None:
    await tg.send(OWNER, "/new Errands")
    assert "Started a new session: Errands." in (await tg.reply(OWNER)).text
    await tg.send(OWNER, "/NEW")  # commands are matched in any case, like Telegram's menu
    assert "Started a new session" in (await tg.reply(OWNER)).text
    assert tg.llm.requests == []


async def test_non_text_message_gets_a_short_reply(tg: TG) -> None:
    await tg.send(OWNER, None, sticker={"file_id": "s", "file_unique_id": "u", "width": 1,
                                        "height": 1, "is_animated": False, "is_video": False,
                                        "type": "regular"})  # fmt: skip
    reply = await tg.reply(OWNER)
    assert reply.text.startswith("I read text, voice messages, photos and documents, but not")
    assert tg.llm.requests == []


async def test_newsession_starts_a_named_session_with_fresh_history(tg: TG) -> None:
    await tg.send(OWNER, "remember the word apple")
    await tg.reply(OWNER)
    await tg.send(OWNER, "/newsession Trip planning")
    confirm = await tg.reply(OWNER)
    assert "Trip planning" in confirm.text
    await tg.send(OWNER, "what word?")
    await tg.reply(OWNER)
    contents = [
        without_context(m["content"])
        for m in [r for r in tg.llm.requests if r.get("stream")][-1]["messages"]
        if m["role"] != "system"
    ]
    assert contents == ["what word?"]
    async with tg.app.session_factory() as s:
        sessions = list((await s.execute(select(ChatSession).order_by(ChatSession.id))).scalars())
    assert len(sessions) == 2
    assert sessions[0].ended_at is not None and sessions[1].name == "Trip planning"


async def test_history_survives_a_restart(tg: TG) -> None:
    await tg.send(OWNER, "my cat is called Miso")
    assert (await tg.reply(OWNER)).text == "echo: my cat is called Miso"
    await tg.restart()
    await tg.send(OWNER, "what is my cat called?")
    assert (await tg.reply(OWNER)).text == "echo: what is my cat called?"
    contents = [
        without_context(m["content"])
        for m in tg.llm.requests[-1]["messages"]
        if m["role"] != "system"
    ]
    assert contents == [
        "my cat is called Miso",
        "echo: my cat is called Miso",
        "what is my cat called?",
    ]
