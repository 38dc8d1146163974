"""A real database, memory store and model client for the session tests, on a settable clock."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Unpack

import httpx
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from bot.config import Settings
from bot.llm.client import LLMClient
from bot.sessions.archive import Archiver
from bot.sessions.split import SessionSplit
from db.conversation import ADD_MESSAGE, MessageFields, message_params
from db.engine import SessionFactory, create_engine, session_factory
from db.migrate import upgrade
from db.models import ChatSession, Message
from db.repos import core as repo
from tests.conftest import make_settings
from tests.fakes.openai_server import FakeOpenAI
from tools.memory.models import Memory
from tools.memory.setup import build_memory
from tools.memory.store import MemoryStore


async def open_session(s: AsyncSession, user_id: int, now: datetime) -> ChatSession:
    """The user's open session, created when there is none."""
    found = await repo.current_session(s, user_id)
    return found or await repo.create_session(s, user_id, None, now)


async def add_message(s: AsyncSession, **message: Unpack[MessageFields]) -> int:
    """Store one message as the conversation does (db/conversation.py); its id."""
    return int((await s.execute(ADD_MESSAGE, message_params(message))).scalar_one())


class FakeClock:
    """A clock the test moves by hand."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **kw: float) -> datetime:
        self.now = self.now + timedelta(**kw)
        return self.now


@dataclass
class Env:
    settings: Settings
    engine: AsyncEngine
    sf: SessionFactory
    clock: FakeClock
    memory: MemoryStore
    llm: LLMClient
    archiver: Archiver
    jobs: SessionSplit

    async def chat(
        self, telegram_id: int, *texts: str, timezone: str | None = None
    ) -> tuple[int, int]:
        """Store user/assistant turns in the user's open session: (user id, session id)."""
        async with self.sf() as s, s.begin():
            user = await repo.get_or_create_user(s, telegram_id, f"user{telegram_id}", self.clock())
            if timezone is not None:
                user.timezone = timezone
            session = await open_session(s, user.id, self.clock())
            for n, text in enumerate(texts):
                await add_message(
                    s,
                    session_id=session.id,
                    user_id=user.id,
                    role="user" if n % 2 == 0 else "assistant",
                    content=text,
                    request_id=f"r{n}",
                    now=self.clock(),
                )
            return user.id, session.id

    async def session(self, session_id: int) -> ChatSession:
        async with self.sf() as s:
            found = await s.get(ChatSession, session_id)
            assert found is not None
            return found

    async def memories(self, user_id: int, layer: str | None = None) -> list[Memory]:
        async with self.sf() as s:
            stmt = select(Memory).where(Memory.user_id == user_id).order_by(Memory.id)
            if layer:
                stmt = stmt.where(Memory.layer == layer)
            return list((await s.execute(stmt)).scalars())

    async def messages(self, session_id: int) -> list[Message]:
        async with self.sf() as s:
            return await repo.session_messages(s, session_id)


def summary_requests(fake_llm: FakeOpenAI) -> list[dict[str, Any]]:
    """The model requests archiving made (not streamed, unlike chat turns)."""
    return [r for r in fake_llm.requests if not r.get("stream")]


@asynccontextmanager
async def make_env(
    tmp_path: Path, fake_llm: FakeOpenAI, now: datetime, **overrides: Any
) -> AsyncIterator[Env]:
    settings = make_settings(tmp_path, fake_llm, **overrides)
    engine = create_engine(settings.db_url)
    await upgrade(engine)
    sf = session_factory(engine)
    clock = FakeClock(now)
    http = httpx.AsyncClient()
    llm = LLMClient(settings, retry_base_delay=0.01, retry_max_delay=0.02)
    memory = await build_memory(settings, sf, http, clock)
    archiver = Archiver(sf, memory, llm, clock, default_tz=settings.tz)
    jobs = SessionSplit(settings, sf, archiver, clock)
    try:
        yield Env(settings, engine, sf, clock, memory, llm, archiver, jobs)
    finally:
        await llm.close()
        await http.aclose()
        await engine.dispose()
