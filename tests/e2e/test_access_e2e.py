"""Pairing from the chat, through the assembled app on the fake Telegram: a stranger's
message asks the owner, Allow lets them talk at once and across restarts, Deny and Remove
keep them out, /users lists, requests are rate-limited, groups are admitted the same way,
and with no ALLOWED_USER_IDS the first private message's sender becomes the owner."""

from __future__ import annotations

import os
import stat
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from sqlalchemy import text

from bot.access.gate import owner_code
from bot.access.pairing import CODE_KEPT_OUT, full_text
from bot.access.repo import MAX_WAITING, REQUESTS_PER_HOUR
from bot.telegram.delivery import TelegramDelivery
from tests.e2e.conftest import OWNER, STRANGER, TG

GROUP = -100555


def named(user_id: int, name: str) -> dict[str, Any]:
    return {"from": {"id": user_id, "is_bot": False, "first_name": name}}


async def deliveries(tg: TG) -> None:
    """What `sidekick run` does at start: the features' deliveries go through Telegram."""
    await tg.app.start_features(TelegramDelivery(tg.runtime.outbox))


def buttons(markup: dict[str, Any] | None) -> list[tuple[str, str]]:
    rows = (markup or {}).get("inline_keyboard", [])
    return [(b["text"], b["callback_data"]) for row in rows for b in row]


async def test_allowed_stranger_talks_at_once_and_after_a_restart(tg: TG) -> None:
    await deliveries(tg)
    await tg.send(STRANGER, "let me in", **named(STRANGER, "Mallory"))
    told = await tg.reply(STRANGER)
    assert "I asked its owner to let you in" in told.text
    assert f"Your Telegram user id is {STRANGER}" in told.text
    asked = await tg.reply(OWNER)
    assert "Mallory" in asked.text and str(STRANGER) in asked.text
    assert buttons(asked.reply_markup) == [
        ("Allow", f"access:allow:{STRANGER}"),
        ("Deny", f"access:deny:{STRANGER}"),
    ]
    await tg.send(STRANGER, "hello?")  # one open request: no second one, no second reply
    await tg.idle()
    assert tg.unread(STRANGER) == [] and tg.unread(OWNER) == [] and tg.llm.requests == []

    await tg.press(OWNER, f"access:allow:{STRANGER}")
    assert "let you in" in (await tg.reply(STRANGER)).text
    await tg.idle()
    edited = tg.server.sent_to(OWNER)[-1]
    assert edited.text.endswith("→ Allowed.") and not edited.reply_markup
    await tg.send(STRANGER, "thanks")
    assert (await tg.reply(STRANGER)).text == "echo: thanks"

    await tg.restart()
    await tg.send(STRANGER, "still here")
    assert (await tg.reply(STRANGER)).text == "echo: still here"


async def test_denied_stranger_is_told_once_and_not_asked_about_again(tg: TG) -> None:
    await deliveries(tg)
    await tg.send(STRANGER, "hi")
    await tg.reply(STRANGER)
    await tg.reply(OWNER)
    await tg.press(OWNER, f"access:deny:{STRANGER}")
    assert "did not let you in" in (await tg.reply(STRANGER)).text
    await tg.send(STRANGER, "please")
    refusal = await tg.reply(STRANGER)
    assert f"ALLOWED_USER_IDS={STRANGER}" in refusal.text
    await tg.send(STRANGER, "pretty please")
    await tg.idle()
    assert tg.unread(STRANGER) == [] and tg.unread(OWNER) == [] and tg.llm.requests == []


async def test_a_crowd_of_strangers_cannot_flood_the_owner_nor_lock_anyone_out(tg: TG) -> None:
    strangers = list(range(700, 700 + MAX_WAITING + 3))
    for who in strangers:
        await tg.send(who, "let me in")
        await tg.send(who, "now")
    await tg.idle()
    to_owner = [m.text for m in tg.server.sent_to(OWNER)]
    asked = [t for t in to_owner if "asks to talk to me" in t]
    # A bounded queue, and the owner hears once that requests were turned away.
    assert len(asked) == MAX_WAITING and len(to_owner) == MAX_WAITING + 1
    assert to_owner[-1] == full_text(MAX_WAITING)
    for who in strangers:  # each hears once: asked, or the plain refusal with their id
        sent = tg.server.sent_to(who)
        assert len(sent) == 1 and f"Your Telegram user id is {who}" in sent[0].text
    refused = [w for w in strangers if "I asked" not in tg.server.sent_to(w)[0].text]
    assert len(refused) == 3
    await tg.send(OWNER, "/users")
    # The list may come in more than one message (a long one is split): wait for its line.
    await tg.server.wait_for(
        lambda: any(
            "3 more request(s) turned away" in (m.text or "")
            for m in tg.server.sent_to(OWNER)[MAX_WAITING + 1 :]
        )
    )
    # The owner answers one: a place is free, and the next stranger (the friend) is asked.
    # Strangers' chats run at once: which three were turned away varies, so the owner
    # denies one that was asked.
    waiting = next(w for w in strangers if w not in refused)
    await tg.press(OWNER, f"access:deny:{waiting}")
    await tg.idle()
    await tg.send(STRANGER, "it's me", **named(STRANGER, "Friend"))
    await tg.server.wait_for(
        lambda: any("Friend" in (m.text or "") for m in tg.server.sent_to(OWNER))
    )


async def test_one_stranger_cannot_use_up_everyones_requests(tg: TG) -> None:
    """A stranger asking for group after group is capped on their own: another stranger
    is still asked about."""
    groups = [GROUP - i for i in range(REQUESTS_PER_HOUR + 2)]
    for group in groups:
        await tg.send(STRANGER, "@sidekick_test_bot hi", chat_id=group)
    await tg.idle()
    assert len(tg.server.sent_to(OWNER)) == REQUESTS_PER_HOUR
    await tg.send(667, "let me in", **named(667, "Friend"))
    await tg.server.wait_for(
        lambda: any("Friend" in (m.text or "") for m in tg.server.sent_to(OWNER))
    )


async def test_forged_access_buttons_are_out_of_date_not_a_crash(tg: TG) -> None:
    await tg.send(OWNER, "/users")
    listing = await tg.reply(OWNER)
    forgeries = ("allow:" + "9" * 80, "remove:-" + "9" * 25, "deny:²", "allow:" + "9" * 19)
    for forged in forgeries:
        await tg.press(OWNER, f"access:{forged}", message_id=listing.message_id)
        await tg.idle()
        answers = [c for c in tg.server.calls if c.method == "answerCallbackQuery"]
        assert "out of date" in answers[-1].params.get("text", ""), forged
    await tg.send(OWNER, "still fine?")
    assert (await tg.reply(OWNER)).text == "echo: still fine?"


async def test_an_owner_the_bot_cannot_reach_leaves_the_stranger_the_plain_refusal(
    tg: TG,
) -> None:
    tg.server.fail_next("sendMessage", 403)  # the owner never opened a chat with the bot
    await tg.send(STRANGER, "let me in")
    told = await tg.reply(STRANGER)
    assert f"ALLOWED_USER_IDS={STRANGER}" in told.text and "I asked" not in told.text
    await tg.send(STRANGER, "hello?")  # the request stays open: nothing more is said
    await tg.idle()
    assert tg.unread(STRANGER) == [] and tg.server.sent_to(OWNER) == []
    assert [c.status for c in tg.server.calls if c.method == "sendMessage"][:1] == [403]


async def test_users_lists_and_removes_and_only_the_owner_may(tg: TG) -> None:
    await deliveries(tg)
    await tg.send(STRANGER, "hi", **named(STRANGER, "Mallory"))
    await tg.reply(STRANGER)
    await tg.reply(OWNER)
    await tg.press(OWNER, f"access:allow:{STRANGER}")
    await tg.reply(STRANGER)
    await tg.idle()
    await tg.send(2001, "/users")
    assert "Only the bot's owner" in (await tg.reply(2001)).text

    await tg.send(OWNER, "/users")
    listing = await tg.reply(OWNER)
    assert f"Mallory (id {STRANGER})" in listing.text and f"id {OWNER}: in ALLOWED" in listing.text
    assert buttons(listing.reply_markup) == [("Remove Mallory", f"access:remove:{STRANGER}")]
    await tg.press(2001, f"access:remove:{STRANGER}", chat_id=OWNER)
    await tg.idle()
    answers = [c for c in tg.server.calls if c.method == "answerCallbackQuery"]
    assert "Only the bot's owner" in answers[-1].params.get("text", "")
    await tg.press(OWNER, f"access:remove:{STRANGER}")
    await tg.idle()
    assert "Mallory" not in tg.server.sent_to(OWNER)[-1].text
    await tg.send(STRANGER, "still in?")
    assert f"ALLOWED_USER_IDS={STRANGER}" in (await tg.reply(STRANGER)).text
    assert tg.llm.requests == []


async def test_the_owner_admits_a_group(tg: TG) -> None:
    await deliveries(tg)
    await tg.send(STRANGER, "@sidekick_test_bot hi all", chat_id=GROUP)
    told = await tg.reply(GROUP)
    assert "to admit this group" in told.text and str(STRANGER) in told.text
    asked = await tg.reply(OWNER)
    assert "Test group" in asked.text and str(GROUP) in asked.text and str(STRANGER) in asked.text
    await tg.press(OWNER, f"access:allow:{GROUP}")
    assert "admitted this group" in (await tg.reply(GROUP)).text
    await tg.send(667, "@sidekick_test_bot what now?", chat_id=GROUP)  # anyone in it
    assert (await tg.reply(GROUP)).text == "echo: what now?"
    await tg.send(667, "and privately?")  # the group's admission is for the group only
    assert "I asked its owner" in (await tg.reply(667)).text


async def test_first_private_message_makes_the_owner(
    make_tg: Callable[..., Awaitable[TG]], tmp_path: Path
) -> None:
    env = tmp_path / ".env"  # the tests run in tmp_path: the .env these settings come from
    env.write_text("# my settings\nALLOWED_USER_IDS=\nLOG_LEVEL=INFO\n")
    tg = await make_tg(allowed_user_ids="")
    token = tg.app.settings.telegram_bot_token
    assert token is not None
    code = owner_code(token.get_secret_value())
    # Without the code nobody becomes the owner: a stranger who finds a new bot first
    # must not own it.
    await tg.send(5557, "hello bot", **named(5557, "Eve"))
    told = await tg.reply(5557)
    assert "has no owner yet" in told.text and code not in told.text
    await tg.send(5555, f"hello bot {code}", **named(5555, "Ann"))
    first = await tg.reply(5555)
    assert "You are this bot's owner now" in first.text
    # The code is access's alone: not sent to the model, not kept in the conversation or
    # in memory, also when the owner sends it again.
    await tg.send(5555, f"is {code} still the code?")
    assert (await tg.reply(5555)).text == CODE_KEPT_OUT
    await tg.idle()
    assert tg.unread(5555) == [] and tg.llm.requests == []
    async with tg.app.session_factory() as s:
        kept = [str(row) for table in ("messages", "memories")
                for row in (await s.execute(text(f"SELECT * FROM {table}"))).all()]  # fmt: skip
    assert not any(code in row for row in kept)
    assert env.read_text() == "# my settings\nALLOWED_USER_IDS=5555\nLOG_LEVEL=INFO\n"
    assert stat.S_IMODE(os.stat(env).st_mode) == 0o600
    await tg.send(5556, "me too", **named(5556, "Bob"))
    assert "I asked its owner" in (await tg.reply(5556)).text
    assert "Bob (Telegram id 5556)" in (await tg.reply(5555)).text
    await tg.restart()  # the learned owner is kept (here the settings still say empty)
    await tg.send(5555, "again")
    assert (await tg.reply(5555)).text == "echo: again"
