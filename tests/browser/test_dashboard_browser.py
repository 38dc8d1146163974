"""The dashboard in a real browser (headless chromium): sign in by a one-time link from the
fake Telegram, look at every page, edit and forget a memory and see /memory change in the
chat, cancel a reminder, and sign in as a Mini App with forged, stale and valid initData.
Each page's screenshot is saved and named in the test's report."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from bot.telegram.main import start
from tests.browser.conftest import SHOTS
from tests.browser.webdriver import Browser, WebDriverError, cdp
from tests.dashboard_client import dashboard_url, link_for, sign_init_data, user_id
from tests.e2e.conftest import OWNER, TG
from tests.fakes.openai_server import Text
from tools.code import repo as code_repo
from tools.memory.store import MEMORY
from tools.reminders import jobs
from tools.reminders.parse import Fields, build_spec

Shot = Callable[[str], Awaitable[Path]]


@pytest.fixture
async def board_tg(make_tg: Callable[..., Awaitable[TG]]) -> TG:
    tg = await make_tg(dashboard="127.0.0.1:0")
    await start(tg.runtime)  # as `sidekick run` does
    return tg


@pytest.fixture
def shot(
    browser: Browser, request: pytest.FixtureRequest, record_property: Callable[[str, object], None]
) -> Shot:
    async def take(name: str) -> Path:
        path = await browser.screenshot(SHOTS / f"{request.node.name}-{name}.png")
        record_property(f"screenshot {name}", str(path))
        print(f"screenshot: {path}")
        return path

    return take


async def memory_list(tg: TG) -> str:
    await tg.send(OWNER, "/memory")
    return (await tg.reply(OWNER)).text


async def test_link_sign_in_pages_and_changes(board_tg: TG, browser: Browser, shot: Shot) -> None:
    tg = board_tg
    link = await link_for(tg, OWNER)
    uid = await user_id(tg, OWNER)
    store = tg.app.part(MEMORY)
    porto = (await store.store(user_id=uid, layer="long", content="Lives in Porto")).id
    await store.store(user_id=uid, layer="long", content="Likes green tea", category="taste")
    hostile = '<script>document.title="owned"</script><b>bold?</b>'
    await store.store(user_id=uid, layer="mid", content=hostile)
    now = tg.app.deps.clock()
    spec = build_spec(Fields(), "in 3 hours", now, ZoneInfo("UTC"))
    job = await jobs.create(
        tg.app.session_factory, user_id=uid, kind="reminder", text="water the plants",
        words="in 3 hours", spec=spec, now=now,
    )  # fmt: skip

    tg.llm.add(Text("Noted."))
    await tg.send(OWNER, "I moved to <Porto>")
    assert (await tg.reply(OWNER)).text == "Noted."
    async with tg.app.session_factory() as s, s.begin():
        run = await code_repo.add_execution(
            s, user_id=uid, code="print(sum(range(10)))", stdout="45\n", exit_code=0,
            success=True, duration_ms=38.0, sandbox_mode="bwrap",
        )  # fmt: skip

    await browser.go(link)
    await browser.wait_for("#signin")
    await shot("sign-in")
    await browser.click("#signin")
    await browser.wait_text("h1", "Today")
    assert "water the plants" in await browser.source()
    await shot("today")

    base = dashboard_url(tg)
    await browser.go(f"{base}/memories")
    await browser.wait_for(f"#m{porto}")
    # The hostile memory is text on the page: its script never ran, its tags are visible.
    assert await browser.text(".memory p") == hostile
    assert await browser._call("GET", "/title") == "Memories · Sidekick"
    await shot("memories")

    await browser.click(f"#m{porto} a.button")
    await browser.wait_text("h1", f"Memory #{porto}")
    await browser.type("textarea", "Lives in Lisbon")
    await shot("edit")
    await browser.click("form[action$='/" + str(porto) + "'] button")
    await browser.wait_text(".notice", "Saved #")
    chat = await memory_list(tg)
    assert "Lives in Lisbon" in chat and "Porto" not in chat

    await browser.click(f"#m{porto} button.danger")
    await browser.wait_text(".notice", "Forgot #")
    await shot("forgot")
    assert "Lisbon" not in await memory_list(tg)

    await browser.go(f"{base}/reminders")
    await browser.wait_for(f"#r{job.id}")
    await shot("reminders")
    await browser.click(f"#r{job.id} a.button")
    await browser.wait_text("h1", f"Reminder #{job.id}")
    await browser.type("textarea", "water the roses")
    await browser.type("input[name=when]", "every day at 18:00")
    await shot("reminder-edit")
    await browser.click(f"form[action$='/reminders/{job.id}'] button")
    await browser.wait_text(".notice", "Changed #")
    await tg.send(OWNER, "/reminders")
    assert "daily at 18:00 every day" in (chat := (await tg.reply(OWNER)).text)
    assert "water the roses" in chat
    await browser.click(f"#r{job.id} button.danger")
    await browser.wait_text(".notice", "Cancelled #")
    await tg.send(OWNER, "/reminders")
    assert (await tg.reply(OWNER)).text.startswith("No reminders")

    for page in ("usage", "sessions", "code", f"code/{run.id}"):
        await browser.go(f"{base}/{page}")
        await browser.wait_for("header")
        await shot(page.replace("/", "-"))
    assert "45" in await browser.text("pre:nth-of-type(2)")
    for page in ("people", "groups", "approvals", "doctor", "backups"):  # the owner's
        await browser.go(f"{base}/{page}")
        await browser.wait_text("h1", page.capitalize())
        await shot(page)
    await browser.go(f"{base}/sessions")
    await browser.click("main .item a")
    await browser.wait_text("main", "I moved to")
    assert "I moved to <Porto>" in await browser.text("main")  # the text, shown as text
    await shot("transcript")

    await browser.go(f"{base}/memories/{porto + 1000}")
    await browser.wait_for("main")
    assert "There is no memory" in await browser.source()

    await browser.click("header button")  # sign out
    await browser.wait_text(".notice", "Signed out")
    await browser.go(f"{base}/")
    await browser.wait_for("main")
    assert "not signed in" in await browser.source()


async def test_mini_app_sign_in(board_tg: TG, browser: Browser, shot: Shot) -> None:
    """The Mini App page as Telegram opens it: Telegram's script is stood in for by the
    object it makes (window.Telegram.WebApp with initData), and telegram.org is blocked so
    the real one cannot replace it."""
    tg = board_tg
    await link_for(tg, OWNER)
    token = tg.settings.telegram_bot_token
    assert token is not None
    await cdp(browser, "Network.enable", {})
    await cdp(browser, "Network.setBlockedURLs", {"urls": ["*telegram.org*"]})
    user = json.dumps({"id": OWNER, "first_name": "Ana"})
    base = dashboard_url(tg)

    async def open_with(init_data: str, name: str) -> str:
        script = (
            "window.Telegram = {WebApp: {initData: " + json.dumps(init_data)
            + ", ready: function () {}}};"
        )  # fmt: skip
        added = await cdp(browser, "Page.addScriptToEvaluateOnNewDocument", {"source": script})
        await browser.go(f"{base}/miniapp")
        loop_deadline = time.monotonic() + 60
        status = ""
        while time.monotonic() < loop_deadline:
            try:
                status = await browser.text("#status")
            except WebDriverError:  # left for Today: signed in
                break
            if status != "Signing in…":
                break
            await asyncio.sleep(0.1)
        await shot(name)
        await cdp(browser, "Page.removeScriptToEvaluateOnNewDocument",
                  {"identifier": added["identifier"]})  # fmt: skip
        return status

    now = int(time.time())
    forged = sign_init_data({"auth_date": str(now), "user": user}, "1:not-this-bot")
    assert "refused (403)" in await open_with(forged, "miniapp-forged")
    stale = sign_init_data({"auth_date": str(now - 7200), "user": user}, token.get_secret_value())
    assert "refused (403)" in await open_with(stale, "miniapp-stale")
    valid = sign_init_data({"auth_date": str(now), "user": user}, token.get_secret_value())
    await open_with(valid, "miniapp-valid")
    await browser.wait_for("header")
    assert (await browser.url()).rstrip("/") == base
    assert "Next reminders" in await browser.source()
    await shot("miniapp-today")
