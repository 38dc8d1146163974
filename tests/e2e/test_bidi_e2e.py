"""Bidi controls in text from a provider or a model reach the person escaped, through the
assembled app on the fake Telegram: U+202E in an answer or in a model's name (/usage,
/model) is shown as \\u202e, so nothing reads reordered (bot/shown.py, applied where
bot/telegram/render.py renders)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from bot.shown import BIDI
from bot.telegram.delivery import TelegramDelivery
from db.repos.core import Recipient
from tests.e2e.conftest import OWNER, TG
from tests.fakes.openai_server import Text

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
