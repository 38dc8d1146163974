"""The code tool through the real Dispatcher: the model runs code, /codestats and
/codefailures report it (in Telegram and the terminal), the button sends the full run as a
file."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from sqlalchemy import select

from bot.terminal.commands import Who, run_command
from tests.e2e.conftest import OWNER, TG
from tests.fakes.openai_server import Calls, Text
from tools.code.commands import FAILURES_USAGE
from tools.code.models import CodeExecution


@pytest.fixture
async def tg(make_tg: Callable[..., Awaitable[TG]]) -> TG:
    return await make_tg(approvals="off")  # code with network access, nobody to press Allow


HOSTILE = 'const s = "```</pre><b>&amp;"; // `x` < y && z\nconsole.log(s); null.boom;'


async def run_via_model(tg: TG, code: str, user: int = OWNER) -> None:
    tg.llm.add(Calls([("code", {"action": "execute", "code": code})]), Text("ran it"))
    await tg.send(user, "please run this")
    assert (await tg.reply(user)).text == "ran it"


async def test_model_runs_code_and_sees_a_compact_result(tg: TG) -> None:
    await run_via_model(tg, "console.log(21 * 2)")
    tool_msgs = [m for m in tg.llm.requests[-1]["messages"] if m["role"] == "tool"]
    result = json.loads(tool_msgs[-1]["content"])
    assert result["success"] is True and result["stdout"] == "42\n"
    assert result["exit_code"] == 0 and result["error_category"] is None
    async with tg.app.session_factory() as s:
        row = (await s.execute(select(CodeExecution))).scalar_one()
    assert row.id == result["execution_id"] and row.tool_call_id  # traced with the call id
    assert row.trigger_message is not None and row.session_id is not None


async def test_codestats_counts_the_users_runs(tg: TG) -> None:
    await run_via_model(tg, "console.log(1)")
    await run_via_model(tg, "let x = ;")
    await run_via_model(tg, "undefinedThing()")
    await tg.send(OWNER, "/codestats")
    chart, reply = await tg.replies(OWNER, 2)
    assert chart.method == "sendPhoto"
    text = reply.text
    assert "last 7 days" in text
    assert "Total: 3" in text and "Succeeded: 1 (33%)" in text and "Failed: 2" in text
    assert "p95" in text and "reference 1" in text and "syntax 1" in text
    await tg.send(2001, "/codestats 30")  # another user sees only their own runs
    assert "No runs yet" in (await tg.reply(2001)).text


async def test_bad_arguments_get_one_line_of_usage(tg: TG) -> None:
    for cmd in ["/codestats abc", "/codestats 0", "/codestats 99999", "/codefailures -1"]:
        await tg.send(OWNER, cmd)
        reply = (await tg.reply(OWNER)).text
        assert reply.startswith("Usage: /code") and "\n" not in reply


async def test_codefailures_keeps_hostile_code_intact_and_sends_the_file(tg: TG) -> None:
    await run_via_model(tg, HOSTILE)
    await run_via_model(tg, "console.log('fine')")
    await tg.send(OWNER, "/codefailures")
    msg = await tg.reply(OWNER)
    await tg.idle()
    assert tg.unread(OWNER) == []  # one failure, one message
    assert "type" in msg.text and HOSTILE in msg.text
    pres = [e for e in msg.entities if e["type"] == "pre"]
    assert len(pres) == 2 and pres[0].get("language") == "typescript"
    utf16 = msg.text.encode("utf-16-le")
    code_block = utf16[pres[0]["offset"] * 2 : (pres[0]["offset"] + pres[0]["length"]) * 2]
    assert code_block.decode("utf-16-le") == HOSTILE
    assert "TypeError" in msg.text
    assert msg.reply_markup is not None


async def test_the_button_sends_the_whole_run_as_a_file(tg: TG) -> None:
    await run_via_model(tg, HOSTILE)
    await tg.send(OWNER, "/codefailures 1")
    msg = await tg.reply(OWNER)
    assert msg.reply_markup is not None
    await tg.press(OWNER, msg.reply_markup["inline_keyboard"][0][0]["callback_data"])
    doc = await tg.reply(OWNER)
    assert doc.method == "sendDocument" and doc.filename and doc.filename.endswith(".txt")
    assert doc.document is not None
    body = doc.document.decode()
    assert HOSTILE in body and "TypeError" in body and "===== stderr =====" in body


async def test_someone_elses_run_is_not_sent(tg: TG) -> None:
    await run_via_model(tg, "null.x")
    await run_via_model(tg, "null.y", user=2002)
    async with tg.app.session_factory() as s:
        rows = list((await s.execute(select(CodeExecution).order_by(CodeExecution.id))).scalars())
    owners_run = rows[0].id
    await tg.send(2002, "/codefailures 3")
    mine = await tg.reply(2002)
    assert "null.y" in mine.text and "null.x" not in mine.text
    await tg.press(2002, f"code:file:{owners_run}")  # a forged button: the owner's run id
    await tg.press(2002, "code:file:not-a-number")
    await tg.idle()
    assert all(m.method != "sendDocument" for m in tg.server.sent_to(2002))


async def test_each_failure_is_a_message_with_its_own_button(tg: TG) -> None:
    await run_via_model(tg, "null.first")
    await run_via_model(tg, "null.second")
    await tg.send(OWNER, "/codefailures")
    newest, older = await tg.replies(OWNER, 2)
    assert "null.second" in newest.text and "null.first" not in newest.text
    assert "null.first" in older.text
    assert newest.reply_markup is not None and older.reply_markup is not None
    await tg.press(OWNER, older.reply_markup["inline_keyboard"][0][0]["callback_data"])
    doc = await tg.reply(OWNER)
    assert doc.document is not None and "null.first" in doc.document.decode()
    assert "null.second" not in doc.document.decode()


async def test_a_refused_file_is_told_in_the_alert(tg: TG) -> None:
    await run_via_model(tg, "null.z")
    await tg.send(OWNER, "/codefailures")
    msg = await tg.reply(OWNER)
    assert msg.reply_markup is not None
    tg.server.fail_next("sendDocument", 400)
    await tg.press(OWNER, msg.reply_markup["inline_keyboard"][0][0]["callback_data"])
    await tg.idle()
    answers = [c.params for c in tg.server.calls if c.method == "answerCallbackQuery"]
    assert "did not take the file" in answers[-1].get("text", "")
    assert all(m.method != "sendDocument" for m in tg.server.sent_to(OWNER))
    assert tg.server.sent_to(OWNER)[-1].text == msg.text  # the message stays as it was


async def test_the_terminal_answers_both_commands(tg: TG) -> None:
    await run_via_model(tg, HOSTILE)
    me = Who(OWNER, "Owner")
    stats = await run_command(tg.app, me, "/codestats")
    assert stats is not None and "Total: 1" in stats and "Failed: 1" in stats
    failures = await run_command(tg.app, me, "/codefailures")
    assert failures is not None and HOSTILE in failures and "TypeError" in failures
    assert await run_command(tg.app, me, "/codefailures 0") == FAILURES_USAGE


async def test_without_namespaces_code_reaches_no_service_of_the_host(
    make_tg: Callable[..., Awaitable[TG]],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A machine with Landlock but neither bubblewrap nor user namespaces (Docker when
    they are refused): the public-only rule cannot be held, so the network is off;
    the bot's own model and Telegram endpoints on 127.0.0.1 and a Unix socket open to
    every account are out of the code's reach, and the start-up line says so."""
    from tools.code import modes, runner

    kernel = modes.Kernel(modes.probe_kernel().landlock_abi, namespaces=False)
    if kernel.landlock_abi < 1:
        pytest.skip("no Landlock in this kernel")
    monkeypatch.setattr(modes, "bwrap_path", lambda: None)
    monkeypatch.setattr(modes, "probe_kernel", lambda: kernel)
    monkeypatch.setattr(runner, "probe_kernel", lambda: kernel)
    folder = Path(tempfile.mkdtemp(prefix="sidekick-test-sock-"))
    os.chmod(folder, 0o755)
    accepted: list[int] = []

    def on_connect(_r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        accepted.append(1)
        w.close()

    server = await asyncio.start_unix_server(on_connect, folder / "api.sock")
    os.chmod(folder / "api.sock", 0o666)
    caplog.set_level(logging.INFO, logger="tools.code.tool")
    tg = await make_tg(approvals="off")
    code = f"""
for (const url of ["{tg.llm.base_url}/models", "{tg.settings.telegram_api_url}/"]) {{
  try {{ const r = await fetch(url); console.log("reached " + r.status); }}
  catch (e) {{ console.log("fetch " + e.code); }}
}}
try {{ await Bun.connect({{ unix: "{folder}/api.sock", socket: {{ data() {{}} }} }});
  console.log("connected"); }} catch (e) {{ console.log("unix " + e.code); }}
"""
    try:
        await run_via_model(tg, code)
    finally:
        server.close()
        await server.wait_closed()
        shutil.rmtree(folder, ignore_errors=True)
    tool_msgs = [m for m in tg.llm.requests[-1]["messages"] if m["role"] == "tool"]
    result = json.loads(tool_msgs[-1]["content"])
    assert result["stdout"].splitlines() == [
        "fetch FailedToOpenSocket",
        "fetch FailedToOpenSocket",
        "unix EACCES",
    ], result
    assert accepted == []
    started = [r.getMessage() for r in caplog.records if r.getMessage().startswith("code tool")]
    assert any("sandbox landlock" in line and "network OFF" in line for line in started), started
