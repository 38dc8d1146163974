"""Cost of the session-split job, which runs every minute.

Builds a temp database with N users (spread over a few time zones), each with one open
session of a few messages, then times:
1. an idle run (nothing due): what the bot pays every minute;
2. a split run where every session is due, against the fake model on 127.0.0.1 with an
   instant answer: the bot's own cost per archived session (query, memory store with the
   offline embedder, marks), not the model's time.

Usage: python bench/session_split.py [--users 1000] [--messages 6]
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx

from bench.cli import options
from bot.llm.client import LLMClient
from bot.sessions.archive import Archiver
from bot.sessions.split import SessionSplit
from db.engine import create_engine, session_factory
from db.migrate import upgrade
from db.repos import core as repo
from tests.conftest import make_settings
from tests.fakes.openai_server import FakeOpenAI, Text
from tests.sessions_env import add_message
from tools.memory.setup import build_memory

ZONES = ["Europe/Berlin", "America/New_York", "Asia/Tokyo", None]


async def main(users: int, messages: int) -> None:
    logging.disable(logging.INFO)  # the job logs every archive; keep the figures readable
    fake = await FakeOpenAI().start()
    counter = itertools.count()

    def respond(body: dict[str, Any]) -> Text:
        n = next(counter)
        return Text(f"Summary number {n}: the user talked about topic {n * 7919 % 104729}.")

    fake.responder = respond
    with tempfile.TemporaryDirectory() as tmp:
        settings = make_settings(Path(tmp), fake, timezone="Europe/Berlin")
        engine = create_engine(settings.db_url)
        await upgrade(engine)
        sf = session_factory(engine)
        now = [datetime(2026, 11, 20, 12, 0, tzinfo=UTC)]

        def clock() -> datetime:
            return now[0]

        async with httpx.AsyncClient() as http:
            llm = LLMClient(settings, retry_base_delay=0.01)
            memory = await build_memory(settings, sf, http, clock)
            archiver = Archiver(sf, memory, llm, clock, default_tz=settings.tz)
            jobs = SessionSplit(settings, sf, archiver, clock)
            t = time.perf_counter()
            async with sf() as s, s.begin():
                for u in range(users):
                    user = await repo.get_or_create_user(s, 10_000 + u, f"u{u}", now[0])
                    user.timezone = ZONES[u % len(ZONES)]
                    session = await repo.create_session(s, user.id, None, now[0])
                    for m in range(messages):
                        await add_message(
                            s,
                            session_id=session.id,
                            user_id=user.id,
                            role="user" if m % 2 == 0 else "assistant",
                            content=f"message {m} of user {u} about their plans",
                            request_id=f"{u}-{m}",
                            now=now[0],
                        )
            print(f"setup: {users} users x {messages} messages in {time.perf_counter() - t:.1f}s")

            idle = []
            for _ in range(20):
                t = time.perf_counter()
                report = await jobs.split_sessions()
                idle.append((time.perf_counter() - t) * 1000)
                assert report.total == 0
            print(
                f"idle run (nothing due), {users} open sessions: "
                f"p50 {statistics.median(idle):.1f} ms, max {max(idle):.1f} ms"
            )

            now[0] += timedelta(days=1)
            t = time.perf_counter()
            report = await jobs.split_sessions()
            took = time.perf_counter() - t
            assert len(report.archived) == users, report
            print(
                f"split run, all {users} due: {took:.1f}s total, "
                f"{took / users * 1000:.1f} ms per session (instant local model)"
            )
            t = time.perf_counter()
            again = await jobs.split_sessions()
            ms = (time.perf_counter() - t) * 1000
            print(f"run right after: {again.total} archived in {ms:.1f} ms")
            await llm.close()
        await engine.dispose()
    await fake.stop()


if __name__ == "__main__":
    args = options(__doc__, users=1000, messages=6)
    asyncio.run(main(args.users, args.messages))
