"""The composition root: builds every long-lived piece once and hands it down."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from bot import heap
from bot.access.gate import AccessList
from bot.agent.hooks import AgentHooks, RequestHooks
from bot.agent.runner import Agent, Incoming
from bot.approvals.gate import TIMEOUT_S as APPROVAL_TIMEOUT_S
from bot.approvals.gate import Approvals
from bot.approvals.settings import ApprovalSettings
from bot.config import Settings
from bot.errors import ConfigError, schema_text
from bot.features import FEATURES, metadata, tool_modules
from bot.llm.client import LLMClient
from bot.logs import Scrubber
from bot.media.attachments import MediaService
from bot.media.setup import build_media, vision_gate
from bot.sessions.archive import Archiver, archiver_from
from bot.sessions.background import BackgroundArchive
from bot.sessions.lifecycle import SessionTurns
from bot.sessions.summary import SUMMARY_MAX_S
from bot.usage.commands import allowed_models
from bot.usage.meter import Meter, MeteredModel
from bot.usage.request import ContextAccounting, UsageTurns
from bot.voice.replies import VoiceReplies, build_voice
from db.engine import SessionFactory, create_engine, session_factory
from db.migrate import SchemaMismatch, require_schema, upgrade
from db.repos.core import Recipient
from scheduler.setup import JobSpec
from tools.base import Clock, ModelEndpoint, ToolDeps, system_clock
from tools.feature import ContextProvider, Deliver, Feature, File, Part
from tools.memory.setup import build_memory
from tools.registry import Registry, build_registry, discovery
from tools.tokens import release as release_tokenizer

log = logging.getLogger(__name__)

T = TypeVar("T")
TASK_PREFIX = (
    "[Scheduled task the user set up earlier; they are not waiting in the chat. Do it now "
    "and write the answer for them.]\n"
)


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
    media: MediaService | None = None  # voice, photos, documents (bot/media)
    voice: VoiceReplies | None = None  # spoken answers (bot/voice)
    warming: asyncio.Task[None] | None = None
    features: tuple[Feature, ...] = FEATURES
    # Set by the adapter that runs (start_features): where unprompted messages go.
    deliver_to: Deliver | None = None
    local: bool = False  # the terminal chat: only its local user is served
    parts: list[Part] = field(default_factory=list)
    meter: Meter | None = None  # budgets and usage (bot/usage), shared by the agent's hooks
    access: AccessList | None = None  # who may talk to the bot (bot/access)
    background: BackgroundArchive | None = None  # summaries /newsession leaves to run

    async def deliver(
        self, recipient: Recipient, text: str, markdown: bool, files: Sequence[File] = ()
    ) -> int:
        if self.deliver_to is None:
            raise RuntimeError("no adapter runs: nothing can be delivered")
        return await self.deliver_to(recipient, text, markdown, files)

    async def ask(self, recipient: Recipient, prompt: str) -> str:
        reply = await self.agent.handle(
            Incoming(
                TASK_PREFIX + prompt,
                telegram_user_id=recipient.telegram_id,
                user_name=recipient.name,
                chat_id=recipient.telegram_id,
                purpose="scheduled",  # metered and budgeted like chat, reported apart
            )
        )
        return reply.text

    def part(self, kind: type[T]) -> T:
        found = next((p for p in (*self.parts, *self.built()) if isinstance(p, kind)), None)
        if found is None:
            raise LookupError(f"no feature built a {kind.__name__} (start_features first)")
        return found

    def built(self) -> tuple[object, ...]:
        """What build_app made that features reach through `part` like their own parts: the
        usage Meter (the agent and the model wrapper need it before any adapter starts, so
        no feature can build it later), the AccessList (the adapter checks every update
        against it; /users changes it), and the background session summaries (/newsession
        needs them in every adapter, with or without the features' jobs)."""
        return tuple(p for p in (self.meter, self.access, self.background) if p is not None)

    def start_features(self, deliver: Deliver, *, local: bool = False) -> list[JobSpec]:
        """The adapter's start: features build their parts, and their jobs come back as the
        scheduler's job specs."""
        self.deliver_to, self.local = deliver, local
        self.parts = [build(self) for f in self.features for build in f.parts]
        return [
            (job.id, job.about, job.every, functools.partial(job.run, self))
            for f in self.features
            for job in f.jobs
        ]

    async def stop_features(self) -> None:
        parts, self.parts = self.parts, []
        for part in reversed(parts):
            try:
                await part.stop()
            except Exception:
                log.exception("stopping %s failed", type(part).__name__)

    def warm_up(self) -> None:
        """Loads what the first message needs (embedding model, token counter;
        bench/startup.py prints what each costs) in a thread, so start-up does not wait for it
        and the first reply rarely does."""
        if self.warming is None:
            self.warming = asyncio.create_task(self._warm())

    async def _warm(self) -> None:
        await asyncio.to_thread(_warm_sync)
        disc = discovery(self.registry)
        try:
            # Every request plans its tools from the catalog's token costs: count them now
            # (on the loop, like a request would), then let the tokenizer go, as nothing
            # else counts per message (/context counts when asked).
            if disc is not None:
                disc.catalog()
        except Exception:
            log.warning("warm-up failed", exc_info=True)
        release_tokenizer()
        heap.freeze()
        heap.trim()

    async def close(self) -> None:
        await self.stop_features()
        if self.background is not None:
            await self.background.stop()
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
        heap.thaw()


def _warm_sync() -> None:
    from tools.memory.embeddings import WordLlamaEmbedder, wordllama_installed
    from tools.tokens import encoder

    try:
        if wordllama_installed():  # memory (offline) and tool_search both use it
            WordLlamaEmbedder().load()
        encoder()
    except Exception:  # the first message that needs them reports the problem
        log.warning("warm-up failed", exc_info=True)


def context_providers(features: tuple[Feature, ...], deps: ToolDeps) -> list[ContextProvider]:
    """Sections the runtime adds to every prompt's [context] block, as the features declare."""
    built = (build(deps) for f in features for build in f.context)
    return [p for p in built if p is not None]


def agent_hooks(registry: Registry) -> list[AgentHooks]:
    """Hooks around the agent loop besides the runtime's own recording."""
    hooks: list[AgentHooks] = []
    disc = discovery(registry)
    if disc is not None:
        hooks.append(ContextAccounting(disc.context_log))
    return hooks


def request_hooks(
    settings: Settings, deps: ToolDeps, meter: Meter, archiver: Archiver | None
) -> list[RequestHooks]:
    """The conversation features' part of every agent request (bot/agent/hooks.py): the
    sessions' close on request, the usage metering. Wired here rather than declared on
    Feature: tools/feature.py may not import bot/agent's protocols, and the metering needs
    the Meter build_app shares with the model wrapper and spoken replies."""
    sessions = SessionTurns(deps.session_factory, deps.clock, archiver)
    usage = UsageTurns(meter, allowed_models(settings.llm_model, settings.llm_models))
    return [sessions, usage]


async def migrated(
    engine: AsyncEngine, features: tuple[Feature, ...], *, check: bool = True
) -> None:
    """Migrations applied, and the schema checked against the models: a database whose
    migration stamp lies would otherwise start "up to date" and fail every message.
    `check=False` (doctor): the difference is reported by its own check instead."""
    await upgrade(engine)
    if not check:
        return
    try:
        await require_schema(engine, metadata(features))
    except SchemaMismatch as exc:
        raise ConfigError(schema_text(exc)) from None


async def build_app(
    settings: Settings,
    *,
    clock: Clock = system_clock,
    llm: LLMClient | None = None,
    features: tuple[Feature, ...] = FEATURES,
    check_schema: bool = True,
) -> App:
    """Everything, built once. On any failure what was already opened is closed again:
    an engine left open keeps a worker thread, and with it the process, alive."""
    engine = create_engine(settings.db_url)
    app: App | None = None
    http: httpx.AsyncClient | None = None
    try:
        await migrated(engine, features, check=check_schema)
        sf = session_factory(engine)
        http = httpx.AsyncClient(timeout=httpx.Timeout(20.0, connect=10.0), follow_redirects=True)
        llm = llm or LLMClient(settings)
        meter = Meter(settings, sf, clock, settings.tz)
        # One model for everything, each wrapper a whole ChatModel: plain completions
        # (summaries, code generation) are metered, the chat's images pass the vision gate,
        # and the agent reaches the context size and the summariser through both.
        metered = MeteredModel(llm, meter)
        deps = ToolDeps(
            settings=settings,
            session_factory=sf,
            http=http,
            llm=metered,
            clock=clock,
            data_dir=settings.data_dir,
            endpoint=ModelEndpoint(
                settings.llm_base_url,
                settings.llm_api_key.get_secret_value() if settings.llm_api_key else None,
                settings.llm_model,
            ),
        )
        deps.memory = await build_memory(
            settings, sf, http, clock, settings.llm_base_url, settings.llm_api_key
        )
        registry = build_registry(deps, tool_modules(features))
        vision = vision_gate(settings, metered)
        # Session summaries run in the background with a time budget of their own, past
        # LLM_TIMEOUT_S (a slow local server takes minutes): a client of their own whose
        # deadline is the budget's ceiling, metered like every model call.
        summary_llm = LLMClient(
            settings.model_copy(update={"llm_timeout_s": SUMMARY_MAX_S}),
            retry_base_delay=llm.retry_base_delay,
            retry_max_delay=llm.retry_max_delay,
        )
        deps.closers.append(summary_llm.close)
        archiver = archiver_from(deps, settings.tz, MeteredModel(summary_llm, meter))
        requests = request_hooks(settings, deps, meter, archiver)
        agent = Agent(
            settings=settings,
            session_factory=sf,
            llm=vision,
            registry=registry,
            clock=clock,
            context_providers=context_providers(features, deps),
            hooks=agent_hooks(registry),
            requests=requests,
            turn_policy=settings.session_policy,  # when a session's period is over
            approvals=Approvals(
                deps.settings_for(ApprovalSettings).approvals,
                APPROVAL_TIMEOUT_S,
                sf,
                clock,
                Scrubber(settings.secrets()).scrub,
            ),
        )
        media = build_media(settings, http, vision)
        key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else None
        voice = build_voice(settings, settings.llm_base_url, key, http, sf, meter)
        app = App(settings, engine, sf, http, llm, deps, registry, agent, media=media, voice=voice)
        app.meter = meter
        app.access = AccessList(settings.allowed_user_ids, sf)
        app.background = BackgroundArchive(archiver)
        app.features = features
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
