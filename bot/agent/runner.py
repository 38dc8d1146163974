"""One request per user message: store it, loop model ↔ tools under a cap, store everything."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast
from zoneinfo import ZoneInfo

from bot.agent.archive import Archiver
from bot.agent.compress import Compressor, Fitted, history_budget
from bot.agent.hooks import AgentHooks, HookChain, HookRefusal, ModelRequest, PromptParts, ToolRound
from bot.agent.message_in import HISTORY_ROWS, store_message
from bot.agent.prompt import (
    context_block,
    message_cost,
    system_prompt,
    to_openai,
    with_context,
)
from bot.agent.recording import Recording
from bot.agent.sessions import start_new_session
from bot.agent.toolexec import CallOutcome, run_call
from bot.config import Settings
from bot.llm.client import ChatModel, LLMToolCall, OnText
from bot.usage import request as metering
from bot.usage.meter import Meter
from db.engine import SessionFactory
from db.repos import core as repo
from db.repos import last_writes
from tools.base import Clock, RequestContext, RequestTools, TextModel, ToolCall, system_clock
from tools.model_call import Purpose
from tools.registry import Registry

log = logging.getLogger(__name__)

COST_CACHE_MAX = 200_000  # token counts of stored messages kept (about 20 MB at most)
# History read with the user's message: (session id, wire messages, token costs, rows read).
Prefetched = tuple[int, list[dict[str, Any]], list[int], int]
Started = tuple[RequestContext, Prefetched, "metering.RequestUsage | None"]


def with_parts(messages: list[dict[str, Any]], parts: list[dict[str, Any]] | None) -> None:
    """Give the newest user message its extra content parts (images), for this call only."""
    if not parts:
        return
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if m["role"] == "user":
            # A new dict: the history dicts are shared with /context's token count.
            text = m["content"] if isinstance(m["content"], str) else ""
            messages[i] = {**m, "content": [{"type": "text", "text": text}, *parts]}
            return


# A prompt section provider (memory auto-recall, ...): returns text for the system prompt.
ContextProvider = Callable[[RequestContext, str], Awaitable[str | None]]


@dataclass
class Incoming:
    text: str
    telegram_user_id: int | None
    user_name: str = ""
    chat_id: int | None = None
    telegram_message_id: int | None = None
    kind: str = "text"  # stored with the message: text, voice, photo, document, ...
    # Content parts for this request only (images as data URIs); history keeps `text`.
    parts: list[dict[str, Any]] = field(default_factory=list)
    purpose: Purpose = "chat"  # "scheduled" for scheduled tasks (usage is reported by purpose)


@dataclass
class Reply:
    text: str  # what the user sees: the answer, then `notes`
    request_id: str
    session_id: int
    tool_calls: int = 0
    stopped_at_cap: bool = False
    # Work that waits until the adapter has delivered the reply (summarising a session the
    # model ended: a model call the user should not wait for). Left undone, the scheduler
    # writes that summary on its next run.
    followup: Callable[[], Awaitable[None]] | None = None
    files: list[tuple[str, bytes]] = field(default_factory=list)  # tools' files for the user
    notes: str = ""  # lines under the answer (fallback, budget warning, usage footer)

    async def delivered(self) -> None:
        """The adapter calls this once the reply is out."""
        followup, self.followup = self.followup, None
        if followup is not None:
            try:
                await followup()
            except Exception:
                log.exception("work after the reply (request %s) failed", self.request_id)


@dataclass
class Events:
    """Callbacks an adapter may set: streamed text so far, and tools starting."""

    on_text: OnText | None = None
    on_tools: Callable[[list[str]], Awaitable[None]] | None = None


@dataclass
class Agent:
    settings: Settings
    session_factory: SessionFactory
    llm: ChatModel
    registry: Registry
    clock: Clock = system_clock
    context_providers: list[ContextProvider] = field(default_factory=list)
    # Summarises a closed session into memory; None when memory is off (the scheduler
    # then writes the summary on its next run).
    archiver: Archiver | None = None
    # Around the loop: recording is always first; /context accounting after.
    hooks: list[AgentHooks] = field(default_factory=list)
    # Budgets and usage recording (bot/usage); None: no metering.
    meter: Meter | None = None
    # Token estimates of stored messages by id (see _wire).
    _costs: dict[int, int] = field(default_factory=dict, init=False, repr=False)

    def user_timezone(self, tz_name: str | None) -> ZoneInfo:
        return self.settings.session_policy.zone(tz_name)

    def _hooks(self, metered: metering.Metering | None) -> HookChain:
        also = metered.in_record if metered is not None else None
        chain: list[AgentHooks] = [Recording(self.session_factory, self.clock, also)]
        if metered is not None:
            chain.append(metered)
        return HookChain([*chain, *self.hooks])

    async def handle(self, incoming: Incoming, events: Events | None = None) -> Reply:
        events = events or Events()
        ctx, prefetched, usage = await self._start_request(incoming)
        metered = metering.Metering(self.meter, usage) if self.meter and usage else None
        reply = await self._loop(ctx, incoming.text, events, prefetched, incoming.parts, metered)
        reply.files = ctx.files_out
        if ctx.new_session_requested:
            # The model asked for a fresh start (memory __NEW_SESSION__): close this session
            # now (the next message opens a new one) and archive it once the reply is out.
            # The reply is returned whatever happens here.
            try:
                started = await start_new_session(
                    self.session_factory,
                    self.clock,
                    telegram_user_id=incoming.telegram_user_id,
                    user_name=incoming.user_name,
                )
            except Exception:
                log.exception("starting the new session the model asked for failed")
            else:
                ended, archiver = started.ended_session_id, self.archiver
                if ended is not None and archiver is not None:

                    async def archive() -> None:
                        await archiver.archive(ended)

                    reply.followup = archive
        return reply

    async def budget_refusal(self, user_id: int | None) -> str | None:
        """The one sentence to send instead of calling a model when a budget or token cap
        (of users.id `user_id`) is used up, else None. The metering hook checks it before
        every model call; callers such as scheduled tasks may ask first."""
        return await self.meter.refusal(user_id) if self.meter is not None else None

    async def _start_request(self, incoming: Incoming) -> Started:
        """Store the message before any model call (bot/agent/message_in.py), then the
        request's context and usage."""
        now = self.clock()
        request_id = uuid.uuid4().hex[:16]
        message: repo.MessageFields = {
            "session_id": 0,  # set once the session is known
            "user_id": 0,
            "role": "user",
            "content": incoming.text,
            "request_id": request_id,
            "now": now,
            "telegram_message_id": incoming.telegram_message_id,
            "kind": incoming.kind,
        }
        user, session_id, has_memories, message_id, rows = await store_message(
            self.session_factory,
            self.settings,
            telegram_user_id=incoming.telegram_user_id,
            user_name=incoming.user_name,
            message=message,
        )
        ctx = RequestContext(
            request_id=request_id,
            user_id=user.id,
            session_id=session_id,
            trigger_message_id=message_id,
            user_name=user.name,
            telegram_user_id=incoming.telegram_user_id,
            chat_id=incoming.chat_id,
            timezone=self.user_timezone(user.timezone),
            clock=self.clock,
            has_memories=has_memories,
        )
        usage = None
        if self.meter is not None:
            settings = self.settings
            models = metering.allowed_models(settings.llm_model, settings.llm_models)
            usage = metering.begin(ctx, user, incoming.purpose, models)
        return ctx, (session_id, *self._wire(rows)), usage

    def _wire(
        self, rows: Sequence[last_writes.AnyHistoryRow]
    ) -> tuple[list[dict[str, Any]], list[int], int]:
        """History rows as wire messages with their token costs; a stored message never
        changes, so its cost is counted once per process."""
        if len(self._costs) > COST_CACHE_MAX:
            self._costs.clear()
        wire = [to_openai(m) for m in rows]
        costs = []
        for m, w in zip(rows, wire, strict=True):
            cost = self._costs.get(m.id)
            if cost is None:
                cost = self._costs[m.id] = message_cost(w)
            costs.append(cost)
        return wire, costs, len(rows)

    async def build_prompt(
        self, ctx: RequestContext, text: str, prefetched: Prefetched | None = None
    ) -> PromptParts:
        # Recall and history are independent reads: run them side by side.
        provided, history = await asyncio.gather(
            asyncio.gather(*(p(ctx, text) for p in self.context_providers), return_exceptions=True),
            self._history(ctx, prefetched),
        )
        sections: list[str] = []
        for section in provided:
            if isinstance(section, BaseException):
                log.error(
                    "context provider failed; answering without it",
                    exc_info=(type(section), section, section.__traceback__),
                )
            elif section:
                sections.append(section)
        now: datetime = ctx.now().astimezone(ctx.timezone)
        # Stable system prompt first (cacheable); time and recall ride in the newest turn.
        block = context_block(now, sections)
        head = system_prompt(ctx.user_name, self.registry.prompt_lines())
        system = "\n\n".join(p for p in (head, history.note) if p)
        return PromptParts(system, sections, with_context(history.history, block))

    async def _history(
        self,
        ctx: RequestContext,
        prefetched: Prefetched | None = None,
    ) -> Fitted:
        """The session's history within the token budget (bot/agent/compress.py)."""
        budget = history_budget(self.settings)
        if prefetched is not None and prefetched[0] == ctx.session_id:
            _, wire, costs, n = prefetched
            # The whole session was read and fits: nothing was ever compressed away.
            if n < HISTORY_ROWS and sum(costs) <= budget:
                return Fitted("", wire)
        # The agent's model writes summaries when it can (the scripted and HTTP ones can).
        writer = cast(TextModel, self.llm) if hasattr(self.llm, "complete_text") else None
        review = self.settings.summary_review
        compressor = Compressor(self.session_factory, writer, self.clock, review)
        return await compressor.fit(ctx.session_id, ctx.user_id, budget)

    async def _loop(
        self,
        ctx: RequestContext,
        text: str,
        events: Events,
        prefetched: Prefetched,
        content_parts: list[dict[str, Any]] | None = None,
        metered: metering.Metering | None = None,
    ) -> Reply:
        hooks = self._hooks(metered)
        model = metered.ru.model if metered is not None else None
        tools = self.registry.for_request(ctx, text)
        parts = await self.build_prompt(ctx, text, prefetched)
        messages: list[dict[str, Any]] = [{"role": "system", "content": parts.system}]
        messages += parts.history
        with_parts(messages, content_parts)
        cap = self.settings.agent_max_turns
        used = 0
        turn = 0
        while True:
            req = ModelRequest(ctx, messages, tools.schemas(), parts, turn)
            try:
                await hooks.on_model_request(req)
            except HookRefusal as refusal:
                answer = str(refusal)
                await hooks.on_answer(ctx, answer)
                return Reply(answer, ctx.request_id, ctx.session_id, used)
            completion = await self.llm.stream(
                messages, req.tools or None, events.on_text, model=model
            )
            await hooks.on_model_response(req, completion)
            turn += 1
            if not completion.tool_calls:
                answer = completion.content.strip() or "(no answer)"
                await hooks.on_answer(ctx, answer)
                notes = completion.cut_note + (metered.extra_lines() if metered else "")
                return Reply(answer + notes, ctx.request_id, ctx.session_id, used, notes=notes)
            calls = completion.tool_calls
            allowed = calls[: max(0, cap - used)]
            refused = calls[len(allowed) :]
            wire_calls: list[dict[str, Any]] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                }
                for c in calls
            ]
            messages.append(
                {
                    "role": "assistant",
                    "content": completion.content or None,
                    "tool_calls": wire_calls,
                    **completion.turn_fields(),  # the reasoning, where the provider needs it
                }
            )
            if events.on_tools is not None and allowed:
                await events.on_tools([c.name for c in allowed])
            outcomes = await asyncio.gather(
                *(self._run_one(ctx, tools, c, completion.content) for c in allowed)
            )
            used += len(allowed)
            note = f"Not run: the limit of {cap} tool calls for this message was reached."
            outcomes.extend(CallOutcome(note, False, "tool-call cap reached", 0.0) for _ in refused)
            await hooks.on_tool_round(
                ToolRound(ctx, completion.content, wire_calls, calls, outcomes)
            )
            for c, outcome in zip(calls, outcomes, strict=True):
                messages.append({"role": "tool", "tool_call_id": c.id, "content": outcome.text})
            if used >= cap:
                answer = (
                    f"I stopped this task after {used} tool calls (the limit for one message is "
                    f"{cap}). Tell me to continue if you want me to go on."
                )
                await hooks.on_answer(ctx, answer)
                notes = metered.extra_lines() if metered is not None else ""
                return Reply(
                    answer + notes, ctx.request_id, ctx.session_id, used, True, notes=notes
                )

    async def _run_one(
        self, ctx: RequestContext, tools: RequestTools, c: LLMToolCall, reasoning: str
    ) -> CallOutcome:
        call = ToolCall(ctx=ctx, call_id=c.id, reasoning=reasoning)
        return await run_call(tools, c.name, c.arguments, call)
