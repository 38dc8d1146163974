"""The plain bot Sidekick is compared with (bench/vs_plain.py), as issue 25 defines it: aiogram
long polling, SQLite history, one chat completion per message through the official openai SDK
(AsyncOpenAI at the fake's base URL), as a weekend project would write it.

It answers the way Sidekick does for a user, so the two are compared on the same work: the
answer is streamed, and while it streams a draft (sendMessageDraft) shows it, at most one
every DRAFT_EVERY_S and none before (a short answer skips it; Sidekick's default interval),
awaited in line as a plain bot would; the answer is then sent once with sendMessage. One
chat's messages are answered one at a time, in order (each sees the previous answer in its
history, as in Sidekick); chats run concurrently.
The SDK is a dev dependency only (pyproject's dev extra); the bot itself does not use it.
Settings from the environment: TELEGRAM_BOT_TOKEN, TELEGRAM_API_URL, LLM_BASE_URL,
LLM_API_KEY, LLM_MODEL, DB_PATH, ALLOWED_USER_IDS (comma-separated).

Usage: python bench/plain_bot.py
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import sqlite3
import time
from collections import defaultdict

import openai
from aiogram import Bot, Dispatcher, F
from aiogram.client.session.aiohttp import AiohttpSession
from aiogram.client.telegram import TelegramAPIServer
from aiogram.types import Message

HISTORY = 20
DRAFT_EVERY_S = 0.7  # Sidekick's DRAFT_INTERVAL_S
SYSTEM = "You are a helpful personal assistant. Keep answers short."
SCHEMA = """
create table if not exists users (id integer primary key, telegram_id integer unique,
                                  name text, created_at real);
create table if not exists messages (id integer primary key, user_id integer, role text,
                                     content text, created_at real);
create index if not exists messages_user on messages (user_id, id);
"""


class Store:
    """SQLite through the standard library, in a worker thread (as aiosqlite would)."""

    def __init__(self, path: str) -> None:
        self.db = sqlite3.connect(path, check_same_thread=False)
        self.db.execute("pragma journal_mode=wal")
        self.db.execute("pragma synchronous=normal")  # the usual pairing with WAL
        self.db.executescript(SCHEMA)
        self.lock = asyncio.Lock()

    async def run(self, fn, *args):  # type: ignore[no-untyped-def]
        async with self.lock:
            return await asyncio.to_thread(fn, *args)

    def _begin(self, telegram_id: int, name: str, text: str) -> tuple[int, list[dict[str, str]]]:
        with self.db:
            self.db.execute(
                "insert or ignore into users (telegram_id, name, created_at) values (?, ?, ?)",
                (telegram_id, name, time.time()),
            )
            (user_id,) = self.db.execute(
                "select id from users where telegram_id = ?", (telegram_id,)
            ).fetchone()
            self.db.execute(
                "insert into messages (user_id, role, content, created_at) values (?, ?, ?, ?)",
                (user_id, "user", text, time.time()),
            )
            rows = self.db.execute(
                "select role, content from messages where user_id = ? order by id desc limit ?",
                (user_id, HISTORY),
            ).fetchall()
        return user_id, [{"role": r, "content": c} for r, c in reversed(rows)]

    def _answer(self, user_id: int, text: str) -> None:
        with self.db:
            self.db.execute(
                "insert into messages (user_id, role, content, created_at) values (?, ?, ?, ?)",
                (user_id, "assistant", text, time.time()),
            )

    async def begin(self, telegram_id: int, name: str, text: str):  # type: ignore[no-untyped-def]
        return await self.run(self._begin, telegram_id, name, text)

    async def answer(self, user_id: int, text: str) -> None:
        await self.run(self._answer, user_id, text)


class Model:
    def __init__(self) -> None:
        self.client = openai.AsyncOpenAI(
            base_url=os.environ["LLM_BASE_URL"],
            api_key=os.environ.get("LLM_API_KEY") or "none",
            timeout=120,
        )
        self.model = os.environ["LLM_MODEL"]

    async def reply(self, history: list[dict[str, str]], on_text) -> str:  # type: ignore[no-untyped-def]
        """The streamed answer; `on_text` gets the whole text so far after each delta."""
        messages = [{"role": "system", "content": SYSTEM}, *history]
        stream = await self.client.chat.completions.create(
            model=self.model,
            messages=messages,  # type: ignore[arg-type]
            stream=True,
        )
        text = ""
        async for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                text += chunk.choices[0].delta.content
                await on_text(text)
        return text


def build(store: Store, model: Model, allowed: set[int]) -> Dispatcher:
    dp = Dispatcher()
    chats: dict[int, asyncio.Lock] = defaultdict(asyncio.Lock)
    draft_ids = itertools.count(1)

    @dp.message(F.text, F.from_user.id.in_(allowed))
    async def on_text(message: Message, bot: Bot) -> None:
        assert message.from_user is not None and message.text is not None
        async with chats[message.chat.id]:  # aiogram runs updates concurrently
            await answer(message, bot, message.from_user.id, message.from_user.full_name)

    async def answer(message: Message, bot: Bot, telegram_id: int, name: str) -> None:
        assert message.text is not None
        user_id, history = await store.begin(telegram_id, name, message.text)
        draft_id, last = next(draft_ids), time.monotonic()

        async def draft(text: str) -> None:
            nonlocal last
            if time.monotonic() - last < DRAFT_EVERY_S:
                return
            last = time.monotonic()
            with contextlib.suppress(Exception):  # a preview only; the answer follows
                await bot.send_message_draft(message.chat.id, draft_id, text=text[-4000:])

        try:
            text = await model.reply(history, draft)
        except openai.OpenAIError as exc:
            await message.answer(f"The model is not answering: {type(exc).__name__}")
            return
        await store.answer(user_id, text)
        await message.answer(text or "(empty answer)")

    return dp


async def main() -> None:
    store = Store(os.environ.get("DB_PATH", "plain_bot.db"))
    model = Model()
    allowed = {int(x) for x in os.environ.get("ALLOWED_USER_IDS", "").split(",") if x.strip()}
    api = TelegramAPIServer.from_base(
        os.environ.get("TELEGRAM_API_URL", "https://api.telegram.org")
    )
    bot = Bot(os.environ["TELEGRAM_BOT_TOKEN"], session=AiohttpSession(api=api))
    try:
        await build(store, model, allowed).start_polling(bot)
    finally:
        await model.client.close()
        store.db.close()


if __name__ == "__main__":
    asyncio.run(main())
