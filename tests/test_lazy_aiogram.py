"""aiogram imported through bot.telegram builds its pydantic models on first use, and a
model built that way parses and builds exactly what the eager import would; when the
self-check fails, every type is rebuilt eagerly and works the same. Each case runs in a
fresh interpreter: aiogram can be imported only once per process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODULE = ROOT / "bot" / "telegram" / "lazy_types.py"

ROUND_TRIP = """
from aiogram.methods import SendDice, SendMessage
from aiogram.methods.base import Response
from aiogram.types import CallbackQuery, Message, Update
update = Update.model_validate({
    "update_id": 7,
    "message": {"message_id": 3, "date": 1700000000, "chat": {"id": 5, "type": "private"},
                "from": {"id": 5, "is_bot": False, "first_name": "Ann"}, "text": "hi",
                "reply_to_message": {"message_id": 2, "date": 1700000000,
                                     "chat": {"id": 5, "type": "private"}, "text": "before"}},
})
call = update.message.answer("hello", parse_mode=None)
sent = SendMessage(chat_id=5, text="x", reply_markup={"inline_keyboard": [[
    {"text": "ok", "callback_data": "c"}]]})
reply = Response[Message].model_validate({"ok": True, "result": {
    "message_id": 4, "date": 1700000000, "chat": {"id": 5, "type": "private"}, "text": "hello"}})
query = CallbackQuery.model_validate({"id": "q", "chat_instance": "i", "data": "c",
    "from": {"id": 5, "is_bot": False, "first_name": "Ann"}})
out = {
    "user": update.message.from_user.first_name,
    "quoted": update.message.reply_to_message.text,
    "call": [type(call).__name__, call.chat_id, call.text],
    "button": sent.reply_markup.inline_keyboard[0][0].callback_data,
    "dumped": sent.model_dump(exclude_none=True)["text"],
    "reply": reply.result.text,
    "query": query.from_user.id,
    "dice": [SendDice(chat_id=5, emoji="🎲").chat_id, SendDice(chat_id=5, emoji="🎲").emoji],
}
"""


def run(code: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", code + ROUND_TRIP + "print(json.dumps([mode, untouched, out]))"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    mode, untouched, out = json.loads(done.stdout.strip().splitlines()[-1])
    return {"mode": mode, "untouched": untouched, "out": out}


EXPECTED = {
    "user": "Ann",
    "quoted": "before",
    "call": ["SendMessage", 5, "hello"],
    "button": "c",
    "dumped": "x",
    "reply": "hello",
    "query": 5,
    "dice": [5, "🎲"],
}


def test_the_bot_imports_aiogram_lazily_and_its_models_work() -> None:
    got = run(
        "import json\n"
        "import bot.telegram\n"
        "from bot.telegram.lazy_types import mode\n"
        "from aiogram.methods import SendDice\n"
        "from aiogram.types import Message, Sticker\n"
        "untouched = not Sticker.__pydantic_complete__ and not SendDice.__pydantic_complete__\n"
        "untouched = [untouched, Message.__pydantic_complete__]\n"
    )
    assert got["mode"] == "lazy"
    # A type or method nobody used yet is not built; Message is, once, as a model of its
    # own (what holds a Message, Update and every reply, reuses it instead of rebuilding it).
    assert got["untouched"] == [True, True]
    assert got["out"] == EXPECTED


def test_a_failed_self_check_falls_back_to_the_eager_rebuild() -> None:
    # The module loaded on its own, so the package's own install() does not run first.
    got = run(
        "import json, importlib.util\n"
        f"spec = importlib.util.spec_from_file_location('probe', {str(MODULE)!r})\n"
        "probe = importlib.util.module_from_spec(spec); spec.loader.exec_module(probe)\n"
        "def broken():\n"
        "    raise RuntimeError('self-check failed')\n"
        "mode = probe.install(check=broken)\n"
        "from aiogram.types import Sticker\n"
        "untouched = not Sticker.__pydantic_complete__\n"
    )
    assert got["mode"] == "eager"
    assert got["untouched"] is False  # every type built, as aiogram itself does
    assert got["out"] == EXPECTED


def test_aiogram_imported_before_is_left_as_it_is() -> None:
    got = run(
        "import json\n"
        "import aiogram\n"
        "from bot.telegram.lazy_types import mode\n"
        "from aiogram.types import Sticker\n"
        "untouched = not Sticker.__pydantic_complete__\n"
    )
    assert got["mode"] == "eager" and got["untouched"] is False
    assert got["out"] == EXPECTED


def test_the_real_start_path_takes_the_lazy_path() -> None:
    """What `python -m bot` imports, in its order, up to a built Dispatcher: if anything on
    the way imported aiogram before bot.telegram (say bot/app.py or bot/cli.py), the lazy
    path would be skipped silently, costing seconds and memory at every start."""
    got = run(
        "import json\n"
        "import bot.__main__, bot.cli, bot.app, bot.telegram.main\n"
        "from bot.telegram.dispatcher import build_dispatcher\n"
        "from bot.telegram.routers import build_routers\n"
        "build_routers()\n"
        "from bot.telegram.lazy_types import mode\n"
        "from aiogram.types import Sticker\n"
        "untouched = not Sticker.__pydantic_complete__\n"
    )
    assert got["mode"] == "lazy"
    assert got["untouched"] is True
    assert got["out"] == EXPECTED
