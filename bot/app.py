"""The composition root: builds every long-lived piece once and hands it down."""

from __future__ import annotations

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

    async def close(self) -> None:
        for closer in reversed(self.deps.closers):
            try:
                await closer()
            except Exception:
                log.exception("closing a tool resource failed")
        await self.llm.close()
        await self.http.aclose()
        await self.engine.dispose()


def context_providers(deps: ToolDeps) -> list[ContextProvider]:
    """Sections the runtime adds to every system prompt (memory auto-recall, ...)."""
    providers: list[ContextProvider] = []
    if deps.memory is not None:
        providers.append(recall_provider(deps.memory, deps.settings.memory_recall_tokens))
    return providers


async def build_app(
    settings: Settings, *, clock: Clock = system_clock, llm: LLMClient | None = None
) -> App:
    """Everything, built once. On any failure what was already opened is closed again:
    an engine left open keeps a worker thread, and with it the process, alive."""
    engine = create_engine(settings.db_url)
    app: App | None = None
    http: httpx.AsyncClient | None = None
    try:
        await upgrade(engine)
        sf = session_factory(engine)
        http = httpx.AsyncClient(timeout=httpx.Timeout(20.0, connect=10.0), follow_redirects=True)
        llm = llm or LLMClient(settings)
        deps = ToolDeps(settings=settings, session_factory=sf, http=http, llm=llm, clock=clock)
        deps.memory = await build_memory(
            settings, sf, http, clock, settings.llm_base_url, settings.llm_api_key
        )
        registry = build_registry(deps)
        agent = Agent(
            settings=settings,
            session_factory=sf,
            llm=llm,
            registry=registry,
            clock=clock,
            context_providers=context_providers(deps),
            archiver=archiver_from(deps, settings.tz),
        )
        app = App(settings, engine, sf, http, llm, deps, registry, agent)
        await registry.start()  # MCP servers up, learned tool usage loaded
        return app
    except BaseException:
        if app is not None:
            await app.close()
        else:
            if http is not None:
                await http.aclose()
            if llm is not None:
                await llm.close()
            await engine.dispose()
        raise
