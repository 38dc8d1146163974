"""The bot talks to the model endpoint over httpx alone: building the app, answering a
message, a summary-style completion and the doctor's model list never import the openai SDK
(its import cost ~0.25 s and ~14 MB at start-up). Runs in a fresh interpreter, since any
test before it may have imported openai in this one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CODE = """
import asyncio, json, sys, tempfile
from pathlib import Path

import bot.cli, bot.telegram.main  # what `sidekick run` imports
from bot.agent.runner import Incoming
from bot.app import build_app
from bot.ops.doctor import check_llm
from tests.conftest import make_settings
from tests.fakes.openai_server import FakeOpenAI


async def main() -> dict[str, object]:
    server = await FakeOpenAI().start()
    app = await build_app(make_settings(Path(tempfile.mkdtemp()), server))
    try:
        reply = await app.agent.handle(Incoming("hello", telegram_user_id=42, user_name="Ann"))
        summary = await app.llm.complete([{"role": "user", "content": "sum up"}])
        endpoint = (await check_llm(app))[0]
    finally:
        await app.close()
        await server.stop()
    return {
        "reply": reply.text,
        "summary": summary.content,
        "doctor": endpoint.ok,
        "openai": sorted(m for m in sys.modules if m == "openai" or m.startswith("openai.")),
    }


print(json.dumps(asyncio.run(main())))
"""


def test_the_bot_runs_without_importing_the_openai_sdk() -> None:
    done = subprocess.run(
        [sys.executable, "-c", CODE], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["reply"] == "echo: hello" and got["summary"] == "echo: sum up"
    assert got["doctor"] is True
    assert got["openai"] == []
