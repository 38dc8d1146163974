"""The dashboard's owner pages on the assembled app started as `sidekick run` starts it
(bot/telegram/main.py start): groups (admit, remove), everyone's "always" approvals
(revoke, as /approvals revoke does), the doctor's checks on the running bot, backups (make
one, download it); anyone else gets 403. And the Mini App: a web_app button under
/dashboard and the menu button, when the dashboard is served over https."""

from __future__ import annotations

import io
import tarfile
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from bot.approvals import repo as approvals_repo
from bot.ops.backup import verify
from bot.ops.doctor import check_all
from bot.ops.operator import OPERATOR
from bot.telegram.delivery import TelegramDelivery
from bot.telegram.main import start
from tests.dashboard_client import Board, link_for, user_id
from tests.e2e.conftest import OWNER, STRANGER, TG

OTHER = 2001
GROUP = -100555
MINI_APP_BASE = "https://dash.example.org/sk"


@pytest.fixture
async def board_tg(make_tg: Callable[..., Awaitable[TG]]) -> TG:
    tg = await make_tg(dashboard="127.0.0.1:0")
    await start(tg.runtime)
    return tg


@pytest.fixture
async def board(board_tg: TG) -> AsyncIterator[Board]:
    b = Board.open(board_tg)
    yield b
    await b.close()


async def test_the_owner_admits_and_removes_a_group(board_tg: TG, board: Board) -> None:
    tg = board_tg
    await board.sign_in(OWNER)
    await tg.send(STRANGER, "@sidekick_test_bot hi all", chat_id=GROUP)
    assert "to admit this group" in (await tg.reply(GROUP)).text
    await tg.reply(OWNER)
    groups = await board.get("/groups")
    assert groups.status_code == 200 and f'action="/people/{GROUP}/allow"' in groups.text
    assert f"/people/{GROUP}/" not in (await board.get("/people")).text  # groups apart
    await board.get("/groups")
    admitted = await board.post(f"/people/{GROUP}/allow")
    assert admitted.status_code == 303 and admitted.headers["location"].startswith("/groups?")
    assert "admitted this group" in (await tg.reply(GROUP)).text
    await tg.send(667, "@sidekick_test_bot what now?", chat_id=GROUP)
    assert (await tg.reply(GROUP)).text == "echo: what now?"

    listed = await board.get(admitted.headers["location"])
    assert "Allowed" in listed.text and f'action="/people/{GROUP}/remove"' in listed.text
    assert (await board.post(f"/people/{GROUP}/remove")).status_code == 303
    await tg.send(667, "@sidekick_test_bot still here?", chat_id=GROUP)
    await tg.idle()
    assert "echo: still here?" not in [m.text for m in tg.server.sent_to(GROUP)]
    assert f'action="/people/{GROUP}/remove"' not in (await board.get("/groups")).text


async def test_the_owner_revokes_anyones_always_rule(board_tg: TG, board: Board) -> None:
    tg = board_tg
    sf, now = tg.app.session_factory, tg.app.deps.clock()
    await board.sign_in(OWNER)
    await link_for(tg, OTHER)
    for who, tool in ((OWNER, "code"), (OTHER, "web_fetch"), (OTHER, "code")):
        asked = await approvals_repo.ask(sf, await user_id(tg, who), OWNER, tool, "run", now)
        assert await approvals_repo.settle(sf, asked, "always", now) == "always"
    page = await board.get("/approvals")
    assert page.status_code == 200 and page.text.count('class="item grant"') == 3
    theirs = await approvals_repo.grants(sf, await user_id(tg, OTHER))
    fetch = next(g for g in theirs if g.tool == "web_fetch")
    assert (await board.http.post(f"/approvals/{fetch.id}/revoke")).status_code == 403  # no CSRF
    revoked = await board.post(f"/approvals/{fetch.id}/revoke")
    assert revoked.status_code == 303
    shown = (await board.get(revoked.headers["location"])).text
    assert f"Revoked #{fetch.id}" in shown and 'id="g' + str(fetch.id) not in shown
    forged = (await board.get("/approvals?revoked=Your+account+is+locked")).text
    assert "locked" not in forged and 'class="notice"' not in forged
    # The person's own /approvals shows it at once; the audit has the revoke, as the
    # command's revoke writes it; the others' grants stand.
    await tg.send(OTHER, "/approvals")
    listing = (await tg.reply(OTHER)).text
    assert "web_fetch" not in listing and "• code" in listing
    log = await approvals_repo.log(sf, await user_id(tg, OTHER), 5)
    assert (log[0].tool, log[0].decision, log[0].by_telegram_id) == ("web_fetch", "revoked", OWNER)
    assert (await board.post(f"/approvals/{fetch.id}/revoke")).status_code == 404
    assert (await board.get("/approvals")).text.count('class="item grant"') == 2


async def test_the_doctor_page_lists_the_doctors_results(board_tg: TG, board: Board) -> None:
    tg = board_tg
    await board.sign_in(OWNER)
    page = await board.get("/doctor")
    assert page.status_code == 200
    results = await check_all(tg.app)  # what `sidekick doctor` runs, on the same app
    assert results and all(r.name in page.text for r in results)
    vectors = "sqlite-vec" if tg.app.engine.dialect.name == "sqlite" else "pgvector"
    assert "@sidekick_test_bot" in page.text and vectors in page.text
    failed = sum(not r.ok for r in results)
    assert f"{len(results) - failed} ok, {failed} failed" in page.text
    token = tg.settings.telegram_bot_token
    assert token is not None and token.get_secret_value() not in page.text


async def test_the_owner_makes_and_downloads_a_backup(board_tg: TG, board: Board) -> None:
    tg = board_tg
    await board.sign_in(OWNER)
    assert "No backup yet" in (await board.get("/backups")).text
    made = await board.post("/backups")
    assert made.status_code == 303, made.text
    page = await board.get(made.headers["location"])
    [archive] = tg.app.part(OPERATOR).backups()
    assert f"Made and verified: {archive.name}" in page.text
    assert f'href="/backups/{archive.name}"' in page.text
    forged = (await board.get("/backups?made=Your+account+is+locked")).text
    assert "locked" not in forged and 'class="notice"' not in forged
    download = await board.http.get(f"/backups/{archive.name}")
    assert download.status_code == 200
    assert download.headers["content-disposition"] == f'attachment; filename="{archive.name}"'
    assert download.content == archive.read_bytes()
    with tarfile.open(fileobj=io.BytesIO(download.content), mode="r:gz") as tar:
        # The database as `sidekick backup` keeps it: the SQLite file, or a pg_dump.
        data = "sidekick.db" if tg.app.engine.dialect.name == "sqlite" else "sidekick.pgdump"
        assert {"backup.json", data} <= set(tar.getnames())
    checked = verify(archive)  # `sidekick backup --verify`'s own check (rows: SQLite's file)
    assert checked.tables.get("users", 1) >= 1
    for name in ("sidekick.db", "..%2Fsidekick.db", "nothing.tar.gz"):
        assert (await board.http.get(f"/backups/{name}")).status_code == 404


async def test_owner_pages_refuse_anyone_else(board_tg: TG, board: Board) -> None:
    tg = board_tg
    await board.sign_in(OTHER)  # let in by ALLOWED_USER_IDS, not the owner
    for path in ("/groups", "/approvals", "/doctor", "/backups", "/backups/x.tar.gz"):
        assert (await board.get(path)).status_code == 403, path
    await board.get("/memories")  # a fresh CSRF token
    assert (await board.post("/backups")).status_code == 403
    assert (await board.post("/approvals/1/revoke")).status_code == 403
    assert tg.app.part(OPERATOR).backups() == []


async def test_without_sidekick_runs_operator_the_pages_say_so(
    make_tg: Callable[..., Awaitable[TG]],
) -> None:
    tg = await make_tg(dashboard="127.0.0.1:0")
    await tg.app.start_features(TelegramDelivery(tg.runtime.outbox))  # nothing handed in
    board = Board.open(tg)
    try:
        await board.sign_in(OWNER)
        for path in ("/doctor", "/backups"):
            page = await board.get(path)
            assert page.status_code == 503 and "sidekick run" in page.text
        assert (await board.get("/approvals")).status_code == 200
    finally:
        await board.close()


async def test_mini_app_button_and_menu_over_https(make_tg: Callable[..., Awaitable[TG]]) -> None:
    tg = await make_tg(dashboard="127.0.0.1:0", dashboard_url=MINI_APP_BASE)
    await start(tg.runtime)
    url = f"{MINI_APP_BASE}/miniapp"
    assert tg.server.menu_button == {
        "type": "web_app",
        "text": "Dashboard",
        "web_app": {"url": url},
    }
    await tg.send(OWNER, "/dashboard")
    reply = await tg.reply(OWNER)
    assert reply.reply_markup is not None
    [[button]] = reply.reply_markup["inline_keyboard"]
    assert button == {"text": "Open the dashboard", "web_app": {"url": url}}
    assert f"{MINI_APP_BASE}/login?t=" in reply.text  # and a link for another browser


async def test_plain_http_sends_the_link_and_resets_the_menu(board_tg: TG) -> None:
    tg = board_tg
    assert tg.server.menu_button == {"type": "default"}
    await tg.send(OWNER, "/dashboard")
    reply = await tg.reply(OWNER)
    assert reply.reply_markup is None and "http://127.0.0.1:" in reply.text
