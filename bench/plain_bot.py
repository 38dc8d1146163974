"""The plain bot Sidekick is compared with (bench/vs_plain.py): aiogram long polling, the
official openai SDK (AsyncOpenAI at the fake's base URL) streaming each answer, SQLite through
the standard library, and nothing else, as a weekend project would write it (issue 44).

Per message: one row for the user's message, the chat's last HISTORY rows as the prompt, the
answer streamed (stream=True) and shown while it streams as Sidekick shows it by default (a
draft, sendMessageDraft, at most one every DRAFT_EVERY_S and none before), then sent once
with sendMessage and stored as one row. One chat's messages are answered in order (aiogram
runs updates concurrently, so a lock per chat), chats concurrently. No users table, no
thread hops: each statement is a few microseconds on the loop, as such a bot does it.
`PLAIN_DRAFTS=0` leaves the drafts out (to see what they cost).

The SDK is a dev dependency only (pyproject's dev extra); the bot itself does not use it.
Settings from the environment: TELEGRAM_BOT_TOKEN, TELEGRAM_API_URL, LLM_BASE_URL,
LLM_API_KEY, LLM_MODEL, DB_PATH, ALLOWED_USER_IDS (comma-separated).

Usage: python bench/plain_bot.py
"""

from __future__ import annotations

import asyncio
import contextlib
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
create table if not exists messages (id integer primary key, chat_id integer, role text,
                                     content text);
create index if not exists messages_chat on messages (chat_id, id);
"""


def main() -> None:
    db = sqlite3.connect(os.environ.get("DB_PATH", "plain_bot.db"), isolation_level=None)
    db.execute("pragma journal_mode=wal")
    db.execute("pragma synchronous=normal")  # WAL's usual pairing, as Sidekick's database
    db.executescript(SCHEMA)
    llm = openai.AsyncOpenAI(
        base_url=os.environ["LLM_BASE_URL"], api_key=os.environ.get("LLM_API_KEY") or "none"
    )
    model = os.environ["LLM_MODEL"]
    drafts = os.environ.get("PLAIN_DRAFTS", "1") != "0"
    allowed = {int(x) for x in os.environ.get("ALLOWED_USER_IDS", "").split(",") if x.strip()}
    api = TelegramAPIServer.from_base(
        os.environ.get("TELEGRAM_API_URL", "https://api.telegram.org")
    )
    bot = Bot(os.environ["TELEGRAM_BOT_TOKEN"], session=AiohttpSession(api=api))
    dp = Dispatcher()
    chats: dict[int, asyncio.Lock] = defaultdict(asyncio.Lock)

    def add(chat_id: int, role: str, content: str) -> None:
        db.execute(
            "insert into messages (chat_id, role, content) values (?, ?, ?)",
            (chat_id, role, content),
        )

    @dp.message(F.text, F.from_user.id.in_(allowed))
    async def on_text(message: Message) -> None:
        chat_id = message.chat.id
        async with chats[chat_id]:
            add(chat_id, "user", message.text or "")
            rows = db.execute(
                "select role, content from messages where chat_id = ? order by id desc limit ?",
                (chat_id, HISTORY),
            ).fetchall()
            prompt = [{"role": "system", "content": SYSTEM}]
            prompt += [{"role": r, "content": c} for r, c in reversed(rows)]
            text, last = "", time.monotonic()
            try:
                stream = await llm.chat.completions.create(
                    model=model,
                    messages=prompt,  # type: ignore[arg-type]
                    stream=True,
                )
                async for chunk in stream:
                    if chunk.choices and chunk.choices[0].delta.content:
                        text += chunk.choices[0].delta.content
                        if drafts and time.monotonic() - last >= DRAFT_EVERY_S:
                            last = time.monotonic()
                            with contextlib.suppress(Exception):  # a preview only
                                await bot.send_message_draft(chat_id, message.message_id, text=text)
            except openai.OpenAIError as exc:
                await message.answer(f"The model is not answering: {type(exc).__name__}")
                return
            add(chat_id, "assistant", text)
            await message.answer(text or "(empty answer)")

    try:
        asyncio.run(dp.start_polling(bot))
    finally:
        db.close()


if __name__ == "__main__":
    main()
