"""The dashboard of the assembled app (the builder `sidekick run` uses, the fake Telegram and
model): signing in by a one-time link and by Mini App initData, each page, and every write
going through the chat's own operations (what the page changes, /memory and /reminders show
at once), for the signed-in person only, with the CSRF token, bounded, escaped."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import timedelta
from zoneinfo import ZoneInfo

import httpx
import pytest
from sqlalchemy import select, update

from bot.approvals import repo as approvals_repo
from bot.dashboard import pages, probe
from bot.dashboard.models import DashboardToken
from bot.dashboard.part import DASHBOARD
from bot.telegram.delivery import TelegramDelivery
from bot.telegram.main import start
from db.models.core import ToolCallRecord
from tests.dashboard_client import Board, link_for, sign_init_data, user_id
from tests.e2e.conftest import OWNER, STRANGER, TG
from tests.fakes.openai_server import Text
from tools.code import repo as code_repo
from tools.memory.store import MEMORY, MemoryStore
from tools.reminders import jobs
from tools.reminders.models import ScheduledJob
from tools.reminders.parse import Fields, build_spec

OTHER = 2001
OWNER_PAGES = ("/people", "/groups", "/approvals", "/doctor", "/backups")


@pytest.fixture
async def board_tg(make_tg: Callable[..., Awaitable[TG]]) -> TG:
    tg = await make_tg(dashboard="127.0.0.1:0")
    await start(tg.runtime)  # as `sidekick run` does
    return tg


@pytest.fixture
async def board(board_tg: TG) -> AsyncIterator[Board]:
    b = Board.open(board_tg)
    yield b
    await b.close()


def store(tg: TG) -> MemoryStore:
    return tg.app.part(MEMORY)


async def remember(tg: TG, telegram_id: int, content: str) -> int:
    """A memory of that person, stored as the memory tool stores one."""
    uid = await user_id(tg, telegram_id)
    return (await store(tg).store(user_id=uid, layer="long", content=content)).id


async def memory_list(tg: TG, telegram_id: int) -> str:
    await tg.send(telegram_id, "/memory")
    return (await tg.reply(telegram_id)).text


async def test_off_unless_enabled(tg: TG) -> None:
    await tg.app.start_features(TelegramDelivery(tg.runtime.outbox))
    await tg.send(OWNER, "/dashboard")
    assert "DASHBOARD=on" in (await tg.reply(OWNER)).text


async def test_one_time_link_signs_in_once(board_tg: TG, board: Board) -> None:
    tg = board_tg
    refused = await board.http.get("/")
    assert refused.status_code == 401 and "/dashboard" in refused.text
    link = await link_for(tg, OWNER)
    token = link.split("t=", 1)[1]
    # Opening the link (or a preview fetching it) spends nothing: the button does.
    for _ in range(2):
        assert (await board.http.get(f"/login?t={token}")).status_code == 200
    done = await board.http.post("/login", data={"t": token})
    assert done.status_code == 303 and done.headers["location"] == "/"
    cookie = done.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie and "max-age=" in cookie
    today = await board.get("/")
    assert today.status_code == 200 and "Next reminders" in today.text
    csp = today.headers["content-security-policy"]
    assert "default-src 'none'" in csp and "script-src" not in csp
    assert today.headers["x-content-type-options"] == "nosniff"

    again = await httpx.AsyncClient(base_url=str(board.http.base_url)).post(
        "/login", data={"t": token}
    )
    assert again.status_code == 403 and "send /dashboard" in again.text

    # An expired link is refused like a used one.
    stale = (await link_for(tg, OWNER)).split("t=", 1)[1]
    async with tg.app.session_factory() as s, s.begin():
        past = tg.app.deps.clock() - timedelta(seconds=1)
        await s.execute(update(DashboardToken).values(expires_at=past).where(
            DashboardToken.kind == "link", DashboardToken.used_at.is_(None)))  # fmt: skip
    async with httpx.AsyncClient(base_url=str(board.http.base_url)) as other:
        assert (await other.post("/login", data={"t": stale})).status_code == 403


async def test_sign_out_everywhere_from_the_chat(board_tg: TG, board: Board) -> None:
    await board.sign_in(OWNER)
    await board_tg.send(OWNER, "/dashboard off")
    assert "signed out" in (await board_tg.reply(OWNER)).text.lower()
    assert (await board.http.get("/")).status_code == 401


async def test_mini_app_init_data(board_tg: TG, board: Board) -> None:
    tg = board_tg
    await link_for(tg, OWNER)  # the owner has talked to the bot
    token = tg.settings.telegram_bot_token
    assert token is not None
    now = int(time.time())

    def data(telegram_id: int, auth_date: int, key: str = token.get_secret_value()) -> str:
        user = json.dumps({"id": telegram_id, "first_name": "Ana"})
        return sign_init_data({"auth_date": str(auth_date), "user": user, "query_id": "q1"}, key)

    async def post(init_data: str) -> httpx.Response:
        async with httpx.AsyncClient(base_url=str(board.http.base_url)) as c:
            return await c.post("/auth/webapp", data={"init_data": init_data})

    forged = await post(data(OWNER, now, key="123:another-bots-token"))
    assert forged.status_code == 403 and "not signed by this bot" in forged.text
    tampered = data(OWNER, now).replace(f"%22id%22%3A+{OWNER}", "%22id%22%3A+2002")
    assert (await post(tampered)).status_code == 403
    stale = await post(data(OWNER, now - 2 * 3600))
    assert stale.status_code == 403 and "stale" in stale.text
    assert (await post(data(STRANGER, now))).status_code == 403
    assert (await post("")).status_code == 403

    valid = await board.http.post("/auth/webapp", data={"init_data": data(OWNER, now)})
    assert valid.status_code == 303, valid.text
    assert (await board.get("/")).status_code == 200

    page = await board.http.get("/miniapp")
    assert "telegram-web-app.js" in page.text and "/static/miniapp.js" in page.text
    assert "script-src 'self' https://telegram.org" in page.headers["content-security-policy"]


async def test_edit_and_forget_a_memory_show_in_memory_at_once(board_tg: TG, board: Board) -> None:
    tg = board_tg
    await board.sign_in(OWNER)
    porto = await remember(tg, OWNER, "Lives in Porto")
    await remember(tg, OWNER, "Likes green tea")
    listing = await board.get("/memories")
    assert "Lives in Porto" in listing.text and "Likes green tea" in listing.text
    assert "2 in all" in listing.text

    edit = await board.get(f"/memories/{porto}")
    assert edit.status_code == 200 and "Lives in Porto" in edit.text
    saved = await board.post(f"/memories/{porto}", {"content": "Lives in Lisbon"})
    assert saved.status_code == 303
    assert "Saved" in (await board.get(saved.headers["location"])).text
    chat = await memory_list(tg, OWNER)
    assert "Lives in Lisbon" in chat and "Porto" not in chat
    # The edit is in the search index too: recall finds the new words.
    hits = await store(tg).recall(user_id=await user_id(tg, OWNER), query="Lisbon", limit=3)
    assert [h.id for h in hits][:1] == [porto]
    found = await board.get("/memories?q=Lisbon")
    assert "Lives in Lisbon" in found.text

    gone = await board.post(f"/memories/{porto}/forget")
    assert gone.status_code == 303
    chat = await memory_list(tg, OWNER)
    assert "Lisbon" not in chat and "Likes green tea" in chat
    assert (await board.get(f"/memories/{porto}")).status_code == 404
    # Each change is in the audit trail as a chat action is: who, what, the outcome.
    async with tg.app.session_factory() as s:
        rows = (
            await s.execute(
                select(ToolCallRecord).where(ToolCallRecord.tool == "dashboard")
                .order_by(ToolCallRecord.id)
            )
        ).scalars().all()  # fmt: skip
    me = await user_id(tg, OWNER)
    assert [(r.user_id, r.ok) for r in rows] == [(me, True), (me, True)]
    assert f"/memories/{porto}" in rows[0].arguments and "Lives in Lisbon" in rows[0].arguments
    assert f"/memories/{porto}/forget" in rows[1].arguments and "csrf" not in rows[1].arguments
    assert all(r.request_id.startswith("dashboard-") for r in rows)


async def test_another_persons_memory_is_refused(board_tg: TG, board: Board) -> None:
    tg = board_tg
    await board.sign_in(OWNER)
    await tg.send(OTHER, "/memory")
    await tg.reply(OTHER)
    theirs = await remember(tg, OTHER, "Other person's secret plan")
    assert (await board.get(f"/memories/{theirs}")).status_code == 404
    await board.get("/memories")  # a fresh CSRF token: the refusal is about the id alone
    edited = await board.post(f"/memories/{theirs}", {"content": "mine now"})
    assert edited.status_code == 404
    assert (await board.post(f"/memories/{theirs}/forget")).status_code == 404
    for odd in ("abc", "-1", "99999999999", "1%2F..%2F2"):
        assert (await board.get(f"/memories/{odd}")).status_code == 404
    assert "Other person's secret plan" not in (await board.get("/memories")).text
    assert "Other person's secret plan" in await memory_list(tg, OTHER)


async def test_a_write_without_the_csrf_token_is_refused(board_tg: TG, board: Board) -> None:
    tg = board_tg
    await board.sign_in(OWNER)
    mid = await remember(tg, OWNER, "Keeps bees")
    no_token = await board.http.post(f"/memories/{mid}/forget")
    assert no_token.status_code == 403 and "another site" in no_token.text
    wrong = await board.http.post(f"/memories/{mid}/forget", data={"csrf": "0" * 40})
    assert wrong.status_code == 403
    assert "Keeps bees" in await memory_list(tg, OWNER)
    # Without the cookie the token alone does nothing either.
    async with httpx.AsyncClient(base_url=str(board.http.base_url)) as stranger:
        assert (
            await stranger.post(f"/memories/{mid}/forget", data={"csrf": board.csrf})
        ).status_code == 401
    assert "Keeps bees" in await memory_list(tg, OWNER)


async def test_a_hostile_memory_shows_as_text(board_tg: TG, board: Board) -> None:
    tg = board_tg
    await board.sign_in(OWNER)
    hostile = '<script>alert("x")</script><img src=x onerror=alert(1)>'
    mid = await remember(tg, OWNER, hostile)
    for path in ("/memories", f"/memories/{mid}", "/memories?q=script+alert"):
        page = (await board.get(path)).text
        assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;" in page, path
        assert "<script>" not in page and "<img" not in page, path


async def test_a_huge_form_is_a_clear_error(board_tg: TG, board: Board) -> None:
    tg = board_tg
    await board.sign_in(OWNER)
    mid = await remember(tg, OWNER, "Runs marathons")
    big = await board.post(f"/memories/{mid}", {"content": "x" * 10_000_000})
    assert big.status_code == 413 and "too large" in big.text
    long = await board.post(f"/memories/{mid}", {"content": "y" * 2001})
    assert long.status_code == 400 and "at most 2000" in long.text
    empty = await board.post(f"/memories/{mid}", {"content": "   "})
    assert empty.status_code == 400
    assert "Runs marathons" in (await board.get("/memories")).text


async def test_memories_are_paged(board_tg: TG, board: Board) -> None:
    tg = board_tg
    await board.sign_in(OWNER)
    for i in range(30):
        await remember(tg, OWNER, f"Numbered fact {i:02d} about topic {i * 7919 % 97}")
    first = await board.get("/memories")
    assert first.text.count('class="item memory"') == 25 and "page 1 of 2" in first.text
    second = await board.get("/memories?page=2")
    assert second.text.count('class="item memory"') == 5 and "Numbered fact 00" in second.text
    assert (await board.get("/memories?page=99")).status_code == 200
    assert (await board.get("/memories?layer=mid")).text.count('class="item memory"') == 0


async def test_cancel_a_reminder_as_the_chat_does(board_tg: TG, board: Board) -> None:
    tg = board_tg
    await board.sign_in(OWNER)
    uid = await user_id(tg, OWNER)
    now = tg.app.deps.clock()
    spec = build_spec(Fields(), "in 2 hours", now, ZoneInfo("UTC"))
    job = await jobs.create(
        tg.app.session_factory, user_id=uid, kind="reminder", text="call <b>Anna</b>",
        words="in 2 hours", spec=spec, now=now,
    )  # fmt: skip
    page = await board.get("/reminders")
    assert "call &lt;b&gt;Anna&lt;/b&gt;" in page.text
    assert (await board.post(f"/reminders/{job.id}/pause")).status_code == 303
    await tg.send(OWNER, "/reminders")
    assert "paused" in (await tg.reply(OWNER)).text
    assert (await board.post(f"/reminders/{job.id}/resume")).status_code == 303
    await tg.send(OWNER, "/reminders")
    assert "next " in (await tg.reply(OWNER)).text
    today = await board.get("/")
    assert "call &lt;b&gt;Anna&lt;/b&gt;" in today.text
    assert (await board.post(f"/reminders/{job.id}/cancel")).status_code == 303
    async with tg.app.session_factory() as s:
        cancelled = await s.get(ScheduledJob, job.id)
        assert cancelled is not None
        assert (cancelled.status, cancelled.next_run_at) == ("cancelled", None)
    await tg.send(OWNER, "/reminders")
    assert (await tg.reply(OWNER)).text.startswith("No reminders")
    assert (await board.post(f"/reminders/{job.id}/cancel")).status_code == 404
    assert (await board.post(f"/reminders/{job.id}/explode")).status_code == 404


async def test_edit_a_reminders_text_and_time_as_the_tool_does(board_tg: TG, board: Board) -> None:
    tg = board_tg
    await board.sign_in(OWNER)
    uid, sf = await user_id(tg, OWNER), tg.app.session_factory
    now, utc = tg.app.deps.clock(), ZoneInfo("UTC")
    job = await jobs.create(
        sf, user_id=uid, kind="reminder", text="call Anna", words="in 2 hours",
        spec=build_spec(Fields(), "in 2 hours", now, utc), now=now,
    )  # fmt: skip
    listing = await board.get("/reminders")
    assert f'href="/reminders/{job.id}"' in listing.text
    form = await board.get(f"/reminders/{job.id}")
    assert form.status_code == 200 and ">call Anna</textarea>" in form.text

    # A new text and a new time: the row the schedule tool's edit writes, in /reminders now.
    moved = await board.post(
        f"/reminders/{job.id}", {"text": "call <b>Bob</b>", "when": "every day at 07:30"}
    )
    assert moved.status_code == 303
    assert f"Changed #{job.id}" in (await board.get(moved.headers["location"])).text
    await tg.send(OWNER, "/reminders")
    chat = (await tg.reply(OWNER)).text
    assert f"#{job.id} reminder · daily at 07:30" in chat and "call <b>Bob</b>" in chat
    async with sf() as s:
        row = await s.get(ScheduledJob, job.id)
        assert row is not None
        assert (row.schedule, row.at_time, row.words) == ("cron", "07:30", "every day at 07:30")
        before = row.next_run_at
        assert before is not None and before.astimezone(utc).strftime("%H:%M") == "07:30"

    # The text alone (no time given: the time stays); a paused one stays paused.
    assert (await board.post(f"/reminders/{job.id}/pause")).status_code == 303
    await board.get(f"/reminders/{job.id}")
    kept = await board.post(f"/reminders/{job.id}", {"text": "call Bob", "when": " "})
    assert kept.status_code == 303
    async with sf() as s:
        row = await s.get(ScheduledJob, job.id)
        assert row is not None
        assert (row.text, row.status, row.next_run_at) == ("call Bob", "paused", before)
    await tg.send(OWNER, "/reminders")
    paused = f"#{job.id} reminder · daily at 07:30 every day · paused · call Bob"
    assert paused in (await tg.reply(OWNER)).text

    # The tool's own refusals, as the chat gets them; nothing changed.
    unreadable = await board.post(f"/reminders/{job.id}", {"text": "x", "when": "when pigs fly"})
    assert unreadable.status_code == 400 and "Not changed" in unreadable.text
    empty = await board.post(f"/reminders/{job.id}", {"text": "  ", "when": ""})
    assert empty.status_code == 400 and "edit needs `text`" in empty.text
    assert (await board.http.post(f"/reminders/{job.id}", data={"text": "x"})).status_code == 403

    # Another person's reminder, or one cancelled, reads as one that does not exist.
    await link_for(tg, OTHER)
    theirs = await jobs.create(
        sf, user_id=await user_id(tg, OTHER), kind="reminder", text="their plan", words="",
        spec=build_spec(Fields(), "in 3 hours", now, utc), now=now,
    )  # fmt: skip
    assert (await board.get(f"/reminders/{theirs.id}")).status_code == 404
    taken = await board.post(f"/reminders/{theirs.id}", {"text": "mine now", "when": ""})
    assert taken.status_code == 404
    async with sf() as s:
        other = await s.get(ScheduledJob, theirs.id)
        assert other is not None and other.text == "their plan"
    assert (await board.post(f"/reminders/{job.id}/cancel")).status_code == 303
    assert (await board.get(f"/reminders/{job.id}")).status_code == 404


async def test_usage_sessions_and_transcripts(board_tg: TG, board: Board) -> None:
    tg = board_tg
    tg.llm.add(Text("Hello there"))
    await tg.send(OWNER, "hi <b>bold</b>")
    assert (await tg.reply(OWNER)).text == "Hello there"
    await board.sign_in(OWNER)
    usage = await board.get("/usage")
    assert usage.status_code == 200 and "fake-model" in usage.text and "<svg" in usage.text
    # Today's row in the per-day table: the answer's tokens, bucketed by the database.
    today = tg.app.deps.clock().astimezone(tg.app.deps.tz)
    row = usage.text.split(f'<tr><td>{today:%Y-%m-%d}</td><td class="n">', 1)
    assert len(row) == 2 and int(row[1].split("<", 1)[0].replace(",", "")) > 0
    sessions = await board.get("/sessions")
    assert sessions.status_code == 200
    sid = sessions.text.split('href="/sessions/', 1)[1].split('"', 1)[0]
    chat = await board.get(f"/sessions/{sid}")
    assert "hi &lt;b&gt;bold&lt;/b&gt;" in chat.text and "Hello there" in chat.text

    await tg.send(OTHER, "/sessions")
    await tg.reply(OTHER)
    other = Board.open(tg)
    try:
        await other.sign_in(OTHER)
        assert (await other.get(f"/sessions/{sid}")).status_code == 404
        assert "hi &lt;b&gt;" not in (await other.get("/sessions")).text
    finally:
        await other.close()


async def test_doctor_and_status_show_the_address(board_tg: TG) -> None:
    board = board_tg.app.part(DASHBOARD)
    settings = board_tg.settings.model_copy(update={"dashboard": f"127.0.0.1:{board.port}"})
    [line] = await probe.check(settings)
    assert line.ok and line.detail == f"{board.url} (answering)"
    assert (await probe.status_line(settings)).startswith("dashboard:   http://127.0.0.1:")
    open_lan = settings.model_copy(update={"dashboard": "0.0.0.0:8765"})
    [warning] = await probe.check(open_lan)
    assert not warning.ok and "reverse proxy" in warning.fix


async def test_code_runs_own_only_escaped_and_masked(board_tg: TG, board: Board) -> None:
    tg = board_tg
    await board.sign_in(OWNER)
    await link_for(tg, OTHER)
    secret = tg.settings.llm_api_key
    assert secret is not None
    mine, other = await user_id(tg, OWNER), await user_id(tg, OTHER)
    async with tg.app.session_factory() as s, s.begin():
        ok = await code_repo.add_execution(
            s, user_id=mine, code="print('<b>hi</b>')", stdout="<b>hi</b>\n", exit_code=0,
            success=True, duration_ms=42.0, sandbox_mode="bwrap",
        )  # fmt: skip
        bad = await code_repo.add_execution(
            s, user_id=mine, code="import os\nprint(os.environ)",
            stderr=f"KeyError: {secret.get_secret_value()}", exit_code=1, success=False,
            error_category="runtime", duration_ms=1500.0, sandbox_mode="bwrap",
        )  # fmt: skip
        theirs = await code_repo.add_execution(
            s, user_id=other, code="print('theirs')", success=True, sandbox_mode="bwrap"
        )
    listing = await board.get("/code")
    assert f'href="/code/{ok.id}"' in listing.text and f'href="/code/{bad.id}"' in listing.text
    assert f'href="/code/{theirs.id}"' not in listing.text
    assert "2 runs, 1 succeeded, 1 failed" in listing.text and "runtime" in listing.text
    shown = await board.get(f"/code/{ok.id}")
    assert "&lt;b&gt;hi&lt;/b&gt;" in shown.text and "<b>hi" not in shown.text
    failed = await board.get(f"/code/{bad.id}")
    assert "KeyError" in failed.text and secret.get_secret_value() not in failed.text
    assert (await board.get(f"/code/{theirs.id}")).status_code == 404


async def test_a_taken_port_leaves_the_bot_running(
    make_tg: Callable[..., Awaitable[TG]],
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        tg = await make_tg(dashboard=f"127.0.0.1:{port}")
        await tg.app.start_features(TelegramDelivery(tg.runtime.outbox))
        assert tg.app.part(DASHBOARD).state.startswith("failed")
        await tg.send(OWNER, "/dashboard")
        assert "not running (failed" in (await tg.reply(OWNER)).text
        tg.llm.add(Text("still here"))
        await tg.send(OWNER, "hello")
        assert (await tg.reply(OWNER)).text == "still here"


async def test_export_holds_own_memories_only(board_tg: TG, board: Board) -> None:
    tg = board_tg
    await board.sign_in(OWNER)
    await link_for(tg, OTHER)
    mine = await remember(tg, OWNER, "Plays the <cello>")
    await remember(tg, OTHER, "Other person's diary")
    as_json = await board.get("/memories/export.json")
    assert as_json.headers["content-disposition"].startswith("attachment;")
    assert [(m["id"], m["content"]) for m in as_json.json()] == [(mine, "Plays the <cello>")]
    as_md = await board.get("/memories/export.md")
    assert f"- Plays the <cello> (#{mine}," in as_md.text and "diary" not in as_md.text
    assert as_md.headers["content-type"].startswith("text/markdown")
    assert (await board.get("/memories/export.html")).status_code == 404


async def test_export_streams_every_memory_a_batch_at_a_time(
    board_tg: TG, board: Board, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Written as read, a few rows a batch: every memory once, in id order, each layer under
    its heading, and the security headers on the streamed answer too."""
    tg = board_tg
    monkeypatch.setattr(pages, "EXPORT_BATCH", 2)
    await board.sign_in(OWNER)
    uid = await user_id(tg, OWNER)
    facts = [
        ("long", "Plays the cello on Sundays"),
        ("mid", "Training for the Berlin marathon"),
        ("long", "Allergic to peanuts"),
        ("short", "Waiting for a parcel from Lisbon"),
        ("long", "Daughter is called Mira"),
    ]
    made = [
        (await store(tg).store(user_id=uid, layer=layer, content=text)).id for layer, text in facts
    ]
    as_json = await board.get("/memories/export.json")
    assert as_json.headers["x-content-type-options"] == "nosniff"
    assert as_json.headers["cache-control"] == "no-store"
    assert [m["id"] for m in as_json.json()] == sorted(made)
    as_md = (await board.get("/memories/export.md")).text
    assert as_md.startswith("# Memories (5, ")
    longs = as_md.split("## long\n", 1)[1].split("## mid\n", 1)[0]
    assert [line.split(" (#")[0] for line in longs.split("\n") if line.startswith("- ")] == [
        "- Plays the cello on Sundays", "- Allergic to peanuts", "- Daughter is called Mira",
    ]  # fmt: skip
    assert "- Training for the Berlin marathon" in as_md.split("## mid\n", 1)[1]
    assert "- Waiting for a parcel from Lisbon" in as_md.split("## short\n", 1)[1]


async def test_export_of_no_memories_is_an_empty_list(board_tg: TG, board: Board) -> None:
    await board.sign_in(OWNER)
    assert (await board.get("/memories/export.json")).json() == []


async def test_schedule_a_reminder_as_the_tool_does(board_tg: TG, board: Board) -> None:
    tg = board_tg
    await board.sign_in(OWNER)
    await board.get("/reminders")
    made = await board.post(
        "/reminders", {"text": "call Anna", "when": "in 2 hours", "kind": "reminder"}
    )
    assert made.status_code == 303
    assert "Scheduled #" in (await board.get(made.headers["location"])).text
    forged = await board.get("/reminders?done=Your+account+is+locked&id=1")
    assert "locked" not in forged.text and 'class="notice"' not in forged.text
    await tg.send(OWNER, "/reminders")
    assert "call Anna" in (await tg.reply(OWNER)).text
    unreadable = await board.post(
        "/reminders", {"text": "call Anna", "when": "when pigs fly", "kind": "reminder"}
    )
    assert unreadable.status_code == 400 and "Not scheduled" in unreadable.text
    odd = await board.post("/reminders", {"text": "x", "when": "in 2 hours", "kind": "bomb"})
    assert odd.status_code == 400
    empty = await board.post("/reminders", {"text": " ", "when": "in 2 hours", "kind": "task"})
    assert empty.status_code == 400 and "needs `text`" in empty.text


async def test_today_shows_open_approval_questions(board_tg: TG, board: Board) -> None:
    tg = board_tg
    await board.sign_in(OWNER)
    uid, now = await user_id(tg, OWNER), tg.app.deps.clock()
    sf = tg.app.session_factory
    await approvals_repo.ask(sf, uid, OWNER, "code", "run <b>rm -rf</b>", now)
    hour_ago = now - timedelta(hours=1)
    await approvals_repo.ask(sf, uid, OWNER, "web_fetch", "an old question", hour_ago)
    today = (await board.get("/")).text
    assert "Waiting for you" in today and "code: run &lt;b&gt;rm -rf&lt;/b&gt;" in today
    assert "an old question" not in today


async def test_pin_a_memory_to_long_term_shows_in_memory_at_once(
    board_tg: TG, board: Board
) -> None:
    tg = board_tg
    await board.sign_in(OWNER)
    uid = await user_id(tg, OWNER)
    trip = (await store(tg).store(user_id=uid, layer="mid", content="Plans a trip to Kyoto")).id
    assert "Kyoto" not in await memory_list(tg, OWNER)  # /memory shows the long layer
    listing = await board.get("/memories")
    assert f'action="/memories/{trip}/pin"' in listing.text

    pinned = await board.post(f"/memories/{trip}/pin")
    assert pinned.status_code == 303
    assert "Pinned to long-term" in (await board.get(pinned.headers["location"])).text
    chat = await memory_list(tg, OWNER)
    assert f"#{trip} [long" in chat and "Plans a trip to Kyoto" in chat
    await tg.send(OWNER, "/memory mid")
    assert "Kyoto" not in (await tg.reply(OWNER)).text
    found = await store(tg).get(user_id=uid, memory_id=trip)
    assert found is not None and found.layer == "long" and found.expires_at is None
    # Recall under the long layer finds it: the index moved with it.
    hits = await store(tg).recall(user_id=uid, query="Kyoto", layers=["long"], limit=3)
    assert [h.id for h in hits][:1] == [trip]
    assert f'action="/memories/{trip}/pin"' not in (await board.get("/memories")).text

    # Another person's memory cannot be pinned.
    await tg.send(OTHER, "/memory")
    await tg.reply(OTHER)
    theirs_uid = await user_id(tg, OTHER)
    theirs = (await store(tg).store(user_id=theirs_uid, layer="short", content="Other plan")).id
    await board.get("/memories")
    assert (await board.post(f"/memories/{theirs}/pin")).status_code == 404
    other = await store(tg).get(user_id=theirs_uid, memory_id=theirs)
    assert other is not None and other.layer == "short"


def asking(telegram_id: int, name: str) -> dict[str, object]:
    return {"from": {"id": telegram_id, "is_bot": False, "first_name": name}}


async def test_the_owner_allows_denies_and_removes_people(board_tg: TG, board: Board) -> None:
    tg = board_tg
    await board.sign_in(OWNER)
    eve = STRANGER + 1
    for who, name in ((STRANGER, "Mallory"), (eve, "Eve")):
        await tg.send(who, "let me in", **asking(who, name))
        assert "asked its owner" in (await tg.reply(who)).text
        assert name in (await tg.reply(OWNER)).text
    people = await board.get("/people")
    assert people.status_code == 200 and 'href="/people"' in people.text
    assert f'action="/people/{STRANGER}/allow"' in people.text
    assert f'action="/people/{eve}/deny"' in people.text
    assert f"id {OWNER}" in people.text  # the seed, which only .env changes

    # A write without the CSRF token changes nothing.
    assert (await board.http.post(f"/people/{STRANGER}/allow")).status_code == 403
    allowed = await board.post(f"/people/{STRANGER}/allow")
    assert allowed.status_code == 303
    assert "Allowed" in (await board.get(allowed.headers["location"])).text
    assert "let you in" in (await tg.reply(STRANGER)).text
    await tg.send(STRANGER, "thanks")
    assert (await tg.reply(STRANGER)).text == "echo: thanks"
    assert (await board.post(f"/people/{eve}/deny")).status_code == 303
    assert "did not let you in" in (await tg.reply(eve)).text
    again = await board.post(f"/people/{eve}/deny")
    assert again.status_code == 409 and "Already decided" in again.text
    assert (await board.post(f"/people/{OWNER}/remove")).status_code == 400

    # Removed from the page: the bot refuses them at once; /users no longer lists them.
    people = await board.get("/people")
    assert "Mallory" in people.text and f'action="/people/{STRANGER}/remove"' in people.text
    assert (await board.post(f"/people/{STRANGER}/remove")).status_code == 303
    await tg.send(STRANGER, "still in?")
    assert f"ALLOWED_USER_IDS={STRANGER}" in (await tg.reply(STRANGER)).text
    await tg.send(OWNER, "/users")
    assert "Mallory" not in (await tg.reply(OWNER)).text
    assert "Mallory" not in (await board.get("/people")).text


async def test_people_is_the_owners_only(board_tg: TG, board: Board) -> None:
    tg = board_tg
    await tg.send(STRANGER, "let me in", **asking(STRANGER, "Mallory"))
    await tg.reply(STRANGER)
    await tg.reply(OWNER)
    await board.sign_in(OTHER)  # let in by ALLOWED_USER_IDS, not the owner
    assert 'href="/people"' not in (await board.get("/")).text
    for path in OWNER_PAGES:
        assert (await board.get(path)).status_code == 403, path
    assert (await board.get("/memories")).status_code == 200  # a fresh CSRF token
    assert (await board.post(f"/people/{STRANGER}/allow")).status_code == 403
    await tg.send(STRANGER, "am I in?")
    await tg.idle()
    assert tg.unread(STRANGER) == []  # still waiting for the owner: no answer
    await tg.send(OWNER, "/users")
    assert "asked, waiting for you" in (await tg.reply(OWNER)).text
