"""The composition root: builds the core once (database, model, tools, agent) and lets every
listed feature add what it declares (tools/feature.py): its parts, model wrappers, request
hooks, gates and prompt context. It names no feature."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import httpx
from sqlalchemy.ext.asyncio import AsyncEngine

from bot import heap
from bot.agent.runner import Agent, Incoming
from bot.config import Settings
from bot.errors import ConfigError, schema_text
from bot.features import FEATURES, metadata, tool_modules
from bot.llm.client import LLMClient
from bot.logs import Scrubber
from db.engine import SessionFactory, create_engine, session_factory
from db.migrate import SchemaMismatch, require_schema, upgrade
from db.repos.core import Recipient
from tools.base import Clock, ModelEndpoint, ToolDeps, system_clock
from tools.chat import ChatModel
from tools.feature import Deliver, Feature, Provide
from tools.hooks import HISTORY, MARKS, PERIODS, File, Gates, Marks, NoPeriods
from tools.registry import Registry, build_registry
from tools.state import Key
from tools.tls import tls_context
from tools.tokens import release as release_tokenizer

if TYPE_CHECKING:
    # apscheduler: only for what runs the jobs (`run`, `chat`), not every app that is built
    from scheduler.setup import JobSpec

log = logging.getLogger(__name__)

T = TypeVar("T")
TASK_PREFIX = (
    "[Scheduled task the user set up earlier; they are not waiting in the chat. Do it now "
    "and write the answer for them.]\n"
)


@dataclass
class App:
    """The running app, and the Host every feature reaches it through (tools/feature.py)."""

    settings: Settings
    engine: AsyncEngine
    session_factory: SessionFactory
    http: httpx.AsyncClient
    llm: LLMClient  # the model's client, without the features' wrappers
    deps: ToolDeps
    features: tuple[Feature, ...] = FEATURES
    registry: Registry = field(init=False)
    agent: Agent = field(init=False)
    warming: asyncio.Task[None] | None = None
    # Set by the adapter that runs (start_features): where unprompted messages go.
    deliver_to: Deliver | None = None
    local: bool = False  # the terminal chat: only its local user is served
    _provides: dict[Key[Any], Provide[Any]] = field(default_factory=dict, repr=False)
    _parts: dict[Key[Any], Any] = field(init=False, repr=False)  # the deps' (ToolDeps.maybe)
    _built: list[Key[Any]] = field(default_factory=list, repr=False)
    _building: set[Key[Any]] = field(default_factory=set, repr=False)

    def __post_init__(self) -> None:
        self._parts = self.deps.parts
        for f in self.features:
            for p in f.adds.parts:
                if p.key in self._provides:
                    raise ValueError(f"{f.name}: another listed feature provides {p.key}")
                self._provides[p.key] = p

    # -- the Host ---------------------------------------------------------------------

    def part(self, key: Key[T]) -> T:
        if key not in self._parts:
            raise LookupError(f"no listed feature built {key} (an adapter not started yet?)")
        value: T = self._parts[key]
        return value

    def has(self, key: Key[Any]) -> bool:
        return key in self._provides or key in self._parts

    def hand(self, key: Key[T], part: T) -> None:
        """A part made above the features by what runs the app (the operator's commands,
        bot/ops/live.py): a feature reaches it with `maybe`, None when nothing handed it."""
        if key in self._provides:
            raise ValueError(f"a listed feature provides {key}")
        self._parts[key] = part

    def maybe(self, key: Key[T]) -> T | None:
        value: T | None = self._parts.get(key)
        return value

    async def need(self, key: Key[T]) -> T:
        if key not in self._parts:
            provide = self._provides.get(key)
            if provide is None:
                raise LookupError(f"no listed feature provides {key}")
            if key in self._building:
                raise RuntimeError(f"{key} needs itself to be built")
            self._building.add(key)
            try:
                self._parts[key] = await provide.build(self)
            finally:
                self._building.discard(key)
            self._built.append(key)
        return self.part(key)

    async def wrapped(self, model: ChatModel) -> ChatModel:
        for f in self.features:
            for wrap in f.adds.wraps:
                model = await wrap(self, model)
        return model

    async def model_client(self, timeout_s: float) -> ChatModel:
        """A client of the model of its own, whose answers may take `timeout_s` (session
        summaries on a slow local server), paced like the app's and wrapped like it."""
        client = LLMClient(
            self.settings.model_copy(update={"llm_timeout_s": timeout_s}),
            retry_base_delay=self.llm.retry_base_delay,
            retry_max_delay=self.llm.retry_max_delay,
        )
        self.deps.closers.append(client.close)
        return await self.wrapped(client)

    async def deliver(
        self,
        recipient: Recipient,
        text: str,
        markdown: bool,
        files: Sequence[File] = (),
        buttons: Sequence[tuple[str, str]] = (),
    ) -> int:
        if self.deliver_to is None:
            raise RuntimeError("no adapter runs: nothing can be delivered")
        return await self.deliver_to(recipient, text, markdown, files, buttons)

    async def ask(self, recipient: Recipient, prompt: str) -> str:
        reply = await self.agent.handle(
            Incoming(
                TASK_PREFIX + prompt,
                telegram_user_id=recipient.telegram_id,
                user_name=recipient.name,
                chat_id=recipient.telegram_id if recipient.chat_id is None else recipient.chat_id,
                purpose="scheduled",  # the features treat it as chat, reported apart
            )
        )
        return reply.text

    # -- building and stopping ----------------------------------------------------------

    async def build_parts(self, *, on_start: bool) -> None:
        for key, provide in self._provides.items():
            if provide.on_start == on_start:
                await self.need(key)

    async def start_features(self, deliver: Deliver, *, local: bool = False) -> list[JobSpec]:
        """The adapter's start: the parts that deliver or run in the background are built,
        and the features' jobs come back as the scheduler's job specs."""
        self.deliver_to, self.local = deliver, local
        await self.build_parts(on_start=True)
        return [
            (job.id, job.about, job.every, functools.partial(job.run, self))
            for f in self.features
            for job in f.adds.jobs
        ]

    async def stop_features(self, *, all_parts: bool = False) -> None:
        """Stops what start_features built (everything: `all_parts`), newest first."""
        for key in reversed(list(self._built)):
            provide = self._provides[key]
            if not (all_parts or provide.on_start):
                continue
            self._built.remove(key)
            part = self._parts.pop(key)
            if provide.stop is None:
                continue
            try:
                await provide.stop(part)
            except Exception:
                log.exception("stopping %s failed", key)

    def warm_up(self) -> None:
        """Loads what the first message needs (what the features declare, then the core's
        token counter; bench/startup.py prints what each costs) in the background, so
        start-up does not wait for it and the first reply rarely does."""
        if self.warming is None:
            self.warming = asyncio.create_task(self._warm())

    async def _warm(self) -> None:
        for f in self.features:
            for warm in f.adds.warm:
                try:
                    await warm(self)
                except Exception:  # the first message that needs it reports the problem
                    log.warning("warm-up of %s failed", f.name, exc_info=True)
        # Nothing else counts tokens per message (/context counts when asked).
        release_tokenizer()
        heap.freeze()
        heap.trim()

    async def close(self) -> None:
        if self.warming is not None:
            # Nobody will use what is still to warm: the rest is cancelled before the parts
            # it reads stop. A load already running in a thread ends on its own (it only
            # reads; asyncio.run's exit waits for it), with nothing after it.
            self.warming.cancel()
            await asyncio.gather(self.warming, return_exceptions=True)
        await self.stop_features(all_parts=True)
        for closer in reversed(self.deps.closers):
            try:
                await closer()
            except Exception:
                log.exception("closing a tool resource failed")
        await self.llm.close()
        await self.http.aclose()
        await self.engine.dispose()


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
    """Everything, built once: the core, then what each listed feature declares, in the
    list's order. On any failure what was already opened is closed again: an engine left
    open keeps a worker thread, and with it the process, alive."""
    engine = create_engine(settings.db_url)
    app: App | None = None
    http: httpx.AsyncClient | None = None
    try:
        await migrated(engine, features, check=check_schema)
        sf = session_factory(engine)
        http = httpx.AsyncClient(
            timeout=httpx.Timeout(20.0, connect=10.0), follow_redirects=True, verify=tls_context()
        )
        llm = llm or LLMClient(settings)
        key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else None
        deps = ToolDeps(
            settings=settings,
            session_factory=sf,
            http=http,
            llm=llm,
            clock=clock,
            data_dir=settings.data_dir,
            endpoint=ModelEndpoint(
                settings.llm_base_url,
                key,
                settings.llm_model,
                others=settings.llm_models,
                max_output_tokens=settings.llm_max_output_tokens,
                context_tokens=llm.context_tokens,
                parameters=llm.parameters,
            ),
            tz=settings.tz,
            owners=settings.allowed_user_ids,
            scrub=Scrubber(settings.secrets()).scrub,
        )
        app = App(settings, engine, sf, http, llm, deps, features)
        marks = Marks()
        app.hand(MARKS, marks)  # the loop's, reached by the features' parts as they are built
        await app.build_parts(on_start=False)
        # One model for everything (the chat, the tools' plain completions), inside every
        # listed feature's wrapper.
        model = await app.wrapped(llm)
        deps.llm = model
        app.registry = build_registry(deps, tool_modules(features))
        requests = [r for f in features for build in f.adds.turns if (r := build(app)) is not None]
        gates = [g for f in features for build in f.adds.gates if (g := build(app)) is not None]
        context = [
            p for f in features for build in f.adds.context if (p := build(deps)) is not None
        ]
        app.agent = Agent(
            settings=settings,
            session_factory=sf,
            llm=model,
            registry=app.registry,
            clock=clock,
            context_providers=context,
            requests=requests,
            marks=marks,
            gate=Gates(gates) if gates else None,
            turn_policy=app.maybe(PERIODS) or NoPeriods(),
            history=app.maybe(HISTORY),
            default_tz=settings.tz,
        )
        await app.registry.start()  # tool sources (servers) up, what the planner learned loaded
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
