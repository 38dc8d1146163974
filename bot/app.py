"""The composition root: builds every long-lived piece once and hands it down."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import dataclass

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.agent.archive import archiver_from
from bot.agent.runner import Agent, ContextProvider
from bot.config import Settings
from bot.llm.client import LLMClient
from db.engine import SessionFactory, create_engine, session_factory
from db.migrate import upgrade
from tools.base import Clock, ToolDeps, system_clock
from tools.memory.recall_context import build_provider as recall_provider
from tools.memory.setup import build_memory
from tools.registry import Registry, build_registry

log = logging.getLogger(__name__)


@dataclass
class App:
    settings: Settings
    engine: AsyncEngine
    session_factory: SessionFactory
    http: httpx.AsyncClient
    llm: LLMClient
    deps: ToolDeps
    registry: Registry
    agent: Agent
    warming: asyncio.Task[None] | None = None

    def warm_up(self) -> None:
        """Loads what the first message needs (embedding model, tokenizer: ~1 s, ~100 MB)
        in a thread, so start-up does not wait for it and the first reply rarely does."""
        if self.warming is None:
            self.warming = asyncio.create_task(asyncio.to_thread(_warm_sync))

    async def close(self) -> None:
        if self.warming is not None:  # a thread cannot be cancelled: let it finish
            with contextlib.suppress(Exception):
                await self.warming
        for closer in reversed(self.deps.closers):
            try:
                await closer()
            except Exception:
                log.exception("closing a tool resource failed")
        await self.llm.close()
        await self.http.aclose()
        await self.engine.dispose()


def _warm_sync() -> None:
    from tools.memory.embeddings import WordLlamaEmbedder, wordllama_installed
    from tools.tokens import encoder

    try:
        if wordllama_installed():  # memory (offline) and tool_search both use it
            WordLlamaEmbedder().load()
        encoder()
    except Exception:  # the first message that needs them reports the problem
        log.warning("warm-up failed", exc_info=True)


def context_providers(deps: ToolDeps) -> list[ContextProvider]:
    """Sections the runtime adds to every system prompt (memory auto-recall, ...)."""
    providers: list[ContextProvider] = []
    if deps.memory is not None:
        providers.append(recall_provider(deps.memory, deps.settings.memory_recall_tokens))
    return providers


async def build_app(
    settings: Settings, *, clock: Clock = system_clock, llm: LLMClient | None = None
) -> App:
    engine = create_engine(settings.db_url)
    await upgrade(engine)
    sf = session_factory(engine)
    http = httpx.AsyncClient(timeout=httpx.Timeout(20.0, connect=10.0), follow_redirects=True)
    llm = llm or LLMClient(settings)
    deps = ToolDeps(settings=settings, session_factory=sf, http=http, llm=llm, clock=clock)
    deps.memory = await build_memory(
        settings, sf, http, clock, settings.llm_base_url, settings.llm_api_key
    )
    registry = build_registry(deps)
    await registry.start()  # MCP servers up, learned tool usage loaded
    agent = Agent(
        settings=settings,
        session_factory=sf,
        llm=llm,
        registry=registry,
        clock=clock,
        context_providers=context_providers(deps),
        archiver=archiver_from(deps, settings.tz),
    )
    return App(settings, engine, sf, http, llm, deps, registry, agent)
