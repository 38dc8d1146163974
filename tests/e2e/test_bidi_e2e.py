"""Bidi controls in text from a provider or a model reach the person escaped, through the
assembled app on the fake Telegram: U+202E in an answer or in a model's name (/usage,
/model) is shown as \\u202e, so nothing reads reordered (bot/shown.py, applied where
bot/telegram/render.py renders)."""

from __future__ import annotations

import html
import re
from collections.abc import Awaitable, Callable

from bot.shown import BIDI
from bot.telegram.delivery import TelegramDelivery
from bot.telegram.main import start
from db.repos.core import Recipient
from tests.dashboard_client import Board, user_id
from tests.e2e.conftest import OWNER, TG
from tests.fakes.openai_server import Text
from tools.memory.store import MEMORY

MODEL = "fake\u202eledom"  # reads as "fakemodel" reversed: "fakeledom" shown as "fakemodel"


async def test_an_answer_and_a_model_name_show_bidi_controls_escaped(
    make_tg: Callable[..., Awaitable[TG]],
) -> None:
    tg = await make_tg(llm_model=MODEL)
    tg.llm.add(Text("Open **invoice\u202egpj.exe** and \u2066this\u2069, \u200fthat\u061c."))
    await tg.send(OWNER, "hello")
    answer = await tg.reply(OWNER)
    assert answer.text == ("Open invoice\\u202egpj.exe and \\u2066this\\u2069, \\u200fthat\\u061c.")
    bold = next(e for e in answer.entities if e["type"] == "bold")  # offsets still right
    assert answer.text[bold["offset"] : bold["offset"] + bold["length"]] == "invoice\\u202egpj.exe"
    await tg.send(OWNER, "/usage")
    await tg.server.wait_for(lambda: any("1 call" in m.text for m in tg.server.sent_to(OWNER)))
    await tg.send(OWNER, "/model")
    await tg.server.wait_for(lambda: any("Your model" in m.text for m in tg.server.sent_to(OWNER)))
    await tg.idle()
    shown = [m.text for m in tg.server.sent_to(OWNER)]
    assert not any(BIDI.search(t) for t in shown), shown
    assert any("fake\\u202eledom" in t and "1 call" in t for t in shown)
    assert any("fake\\u202eledom" in t and "Your model" in t for t in shown)


async def test_a_delivered_files_name_shows_bidi_controls_escaped(tg: TG) -> None:
    """A file a feature delivers (a code job's output) keeps its name readable."""
    await tg.app.start_features(TelegramDelivery(tg.runtime.outbox))
    files = [("invoice\u202egpj.exe", b"MZ")]
    await tg.app.deliver(Recipient(0, OWNER, "Owner"), "your files", False, files)
    _, document = await tg.replies(OWNER, 2)
    assert document.filename == "invoice\\u202egpj.exe"


async def test_the_dashboard_shows_bidi_controls_escaped(
    make_tg: Callable[..., Awaitable[TG]],
) -> None:
    """Issue 45 item 9, the dashboard: a provider's model name (/usage), a model's answer
    (a session's transcript) and a memory a page gave are shown as \\u202e there too."""
    tg = await make_tg(llm_model=MODEL, dashboard="127.0.0.1:0")
    await start(tg.runtime)  # as `sidekick run` does
    tg.llm.add(Text("Open invoice\u202egpj.exe now."))
    await tg.send(OWNER, "hello")
    assert (await tg.reply(OWNER)).text == "Open invoice\\u202egpj.exe now."
    memory = tg.app.part(MEMORY)
    uid = await user_id(tg, OWNER)
    await memory.store(user_id=uid, layer="long", content="Pay invoice\u202egpj.exe today")
    board = Board.open(tg)
    try:
        await board.sign_in(OWNER)
        usage = (await board.get("/usage")).text
        sessions = (await board.get("/sessions")).text
        sid = sessions.split('href="/sessions/', 1)[1].split('"', 1)[0]
        transcript = (await board.get(f"/sessions/{sid}")).text
        memories = (await board.get("/memories")).text
    finally:
        await board.close()
    assert "fake\\u202eledom" in usage and "invoice\\u202egpj.exe now" in transcript
    assert "Pay invoice\\u202egpj.exe today" in memories
    for page in (usage, sessions, transcript, memories):
        assert not BIDI.search(page), BIDI.findall(page)


async def test_a_memory_edited_on_the_dashboard_keeps_its_own_characters(
    make_tg: Callable[..., Awaitable[TG]],
) -> None:
    """The edit form holds the memory as stored (a Hebrew or Arabic note carries U+200F
    marks): saved back unchanged, it is what it was, not its escaped picture."""
    tg = await make_tg(dashboard="127.0.0.1:0")
    await start(tg.runtime)
    tg.llm.add(Text("Hello."))
    await tg.send(OWNER, "hello")
    await tg.reply(OWNER)
    memory = tg.app.part(MEMORY)
    uid = await user_id(tg, OWNER)
    content = "Mother's name: \u200fשרה\u200f, calls on Fridays"
    stored = await memory.store(user_id=uid, layer="long", content=content)
    board = Board.open(tg)
    try:
        await board.sign_in(OWNER)
        form = (await board.get(f"/memories/{stored.id}")).text
        sent = html.unescape(re.search(r"<textarea[^>]*>(.*?)</textarea>", form, re.S)[1])
        assert sent == content
        assert (await board.post(f"/memories/{stored.id}", {"content": sent})).status_code == 303
    finally:
        await board.close()
    after = await memory.get(user_id=uid, memory_id=stored.id)
    assert after is not None and after.content == content
