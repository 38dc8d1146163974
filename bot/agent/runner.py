"""One request per user message: store it, loop model ↔ tools under a cap, store everything.

Storage goes through one seam (db/conversation.py): the turn begins by storing the user's
message before any model call (then the context block it is first sent with), each tool
round and the answer are recorded in one transaction each, with the rows features' turn
hooks hand over inside them. Features reach the loop only through
tools/hooks.py's declarations (no names). A request a restart cut goes on through the
same loop (`resume`), seeded from its records; a writing call is kept as it starts, so a
round a restart cut mid-run is taken up without running such a call again
(bot/agent/toolexec.py).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any
from zoneinfo import ZoneInfo

from bot.agent.markup import (
    ASK_AGAIN,
    GAVE_UP,
    UNREAD,
    Drafts,
    answered,
    ask_again,
    copies,
    failure,
    shown,
)
from bot.agent.prompt import (
    context_block,
    context_size,
    history_budget,
    provided_sections,
    sent_context,
    system_prompt,
    to_openai,
    trim_history,
    with_context,
    with_parts,
)
from bot.agent.toolexec import (
    CUT,
    cut_line,
    done_before,
    repeated_failure,
    run_round,
    wire_calls,
    writes,
)
from bot.config import Settings
from db.conversation import (
    Conversation,
    HistoryRow,
    RecordWrite,
    Started,
    ToolResult,
    Turn,
    kept_context,
)
from db.engine import SessionFactory
from tools.base import Clock, RequestContext, system_clock, user_tz
from tools.chat import ChatModel, LLMToolCall, OnText, text_model
from tools.effects import SEEN, copied
from tools.feature import ContextProvider
from tools.hooks import (
    Gate,
    History,
    HookRefusal,
    Marks,
    ModelRequest,
    NoPeriods,
    PromptParts,
    ReplyButton,
    RequestHooks,
    ToolRound,
    TurnChain,
    TurnPolicy,
)
from tools.model_call import Purpose
from tools.registry import Registry

log = logging.getLogger(__name__)

# Tool calls allowed for one user message: room for a long research task (dozens of calls),
# while a model stuck calling the same tool stops within minutes.
MAX_TOOL_CALLS = 75


def nothing_said(ran: list[str], last: Sequence[ToolResult] = ()) -> str:
    """The answer when the model's is empty: a small model often says nothing after a tool
    result. The person reads which tools it used, and what the last round's calls returned
    where a tool says it briefly (`Tool.brief`: what a program printed, a stored fact)."""
    if not ran:
        return "(no answer)"
    said = f"(The model gave no answer after using {', '.join(dict.fromkeys(ran))}.)"
    briefs = [f"{r.name}: {r.brief}" for r in last if r.ok and r.brief]
    return "\n".join([said, *briefs[:3]])


@dataclass
class Incoming:
    text: str
    telegram_user_id: int | None
    user_name: str = ""
    chat_id: int | None = None
    telegram_message_id: int | None = None
    kind: str = "text"  # stored with the message: what the person sent (text, a file, ...)
    # Content parts for this request only (images as data URIs); history keeps `text`.
    parts: list[dict[str, Any]] = field(default_factory=list)
    purpose: Purpose = "chat"  # "scheduled" for scheduled tasks (nobody is watching)


@dataclass
class Reply:
    text: str  # what the user sees: the answer, then `notes`
    request_id: str
    session_id: int
    tool_calls: int = 0
    files: list[tuple[str, bytes]] = field(default_factory=list)  # tools' files for the user
    buttons: list[ReplyButton] = field(default_factory=list)  # under the answer (Undo)
    notes: str = ""  # lines under the answer (the features' and the model wrappers')
    user_id: int | None = None  # users.id of who asked


@dataclass
class Events:
    """Callbacks an adapter may set: streamed text so far, tools starting, and a line to
    show while the model is waited for (set: the model's outages are waited out)."""

    on_text: OnText | None = None
    on_tools: Callable[[list[str]], Awaitable[None]] | None = None
    on_wait: OnText | None = None


@dataclass
class Agent:
    settings: Settings
    session_factory: SessionFactory
    llm: ChatModel
    registry: Registry
    clock: Clock = system_clock
    context_providers: list[ContextProvider] = field(default_factory=list)
    # The features' per-request hooks, in the list's order (tools/hooks.py).
    requests: list[RequestHooks] = field(default_factory=list)
    # Slots events set on a chat's requests (tools/hooks.py Marks): each request is handed in.
    marks: Marks = field(default_factory=Marks)
    gate: Gate | None = None  # what every tool call passes first; None: all run
    turn_policy: TurnPolicy = field(default_factory=NoPeriods)  # when a period is over
    history: History | None = None  # None: the newest turns that fit, as read
    default_tz: ZoneInfo = field(default_factory=lambda: ZoneInfo("UTC"))
    conversation: Conversation = field(init=False)
    _text: tuple[ChatModel, ChatModel] | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.conversation = Conversation(self.session_factory)

    def model_for(self, parts: bool) -> ChatModel:
        """The model a request streams from; one without content parts (images) goes past
        the wrappers that have nothing to do for it, resolved once per model."""
        if parts:
            return self.llm
        if self._text is None or self._text[0] is not self.llm:
            self._text = (self.llm, text_model(self.llm))
        return self._text[1]

    async def handle(self, incoming: Incoming, events: Events | None = None) -> Reply:
        now, request_id = self.clock(), uuid.uuid4().hex[:16]
        started = await self.conversation.begin_turn(
            telegram_id=incoming.telegram_user_id,
            user_name=incoming.user_name,
            text=incoming.text,
            kind=incoming.kind,
            telegram_message_id=incoming.telegram_message_id,
            request_id=request_id,
            now=now,
            period_over=self.turn_policy.period_over(now),
            chat_id=incoming.chat_id,
        )
        return await self._turn(incoming, request_id, started, events)

    async def resume(
        self, message_id: int, chat_id: int | None, events: Events | None = None
    ) -> Reply | None:
        """Continue the request of a stored user message that a restart cut: the loop starts
        from what the turn recorded (the message, each tool round with its results) and asks
        the model again from there, so a recorded tool call is never run again. None when
        the message is gone."""
        cut = await self.conversation.unfinished(message_id)
        if cut is None:
            return None
        user = cut.user
        incoming = Incoming(
            cut.text, user.telegram_id, user.name, chat_id, cut.telegram_message_id, cut.kind
        )
        return await self._turn(
            incoming, cut.request_id, cut, events, used=cut.tool_calls,
            cut_round=cut.in_flight, cut_calls=cut.started,
        )  # fmt: skip

    async def _turn(
        self,
        incoming: Incoming,
        request_id: str,
        started: Started,
        events: Events | None,
        used: int = 0,
        cut_round: dict[str, Any] | None = None,
        cut_calls: frozenset[str] = frozenset(),
    ) -> Reply:
        user = started.user
        ctx = RequestContext(
            request_id=request_id,
            user_id=user.id,
            session_id=started.session_id,
            trigger_message_id=started.message_id,
            user_name=user.name,
            telegram_user_id=incoming.telegram_user_id,
            chat_id=incoming.chat_id,
            timezone=user_tz(user.timezone, self.default_tz),
            clock=self.clock,
            purpose=incoming.purpose,
        )
        turns = await TurnChain.begin(self.requests, ctx, self.marks)
        reply = await self._loop(
            ctx, incoming, events or Events(), started.history, turns, used, cut_round, cut_calls
        )
        reply.files = turns.files(ctx)
        reply.buttons = turns.buttons(ctx)
        reply.user_id = user.id
        return reply

    async def _loop(
        self,
        ctx: RequestContext,
        incoming: Incoming,
        events: Events,
        rows: Sequence[HistoryRow],
        turns: TurnChain,
        used: int,
        cut_round: dict[str, Any] | None = None,
        cut_calls: frozenset[str] = frozenset(),
    ) -> Reply:
        """`used`: tool calls the request made before (a continued turn's recorded ones);
        `cut_round`: the assistant message of the round a restart cut while `cut_calls` ran."""
        parts = await self.build_prompt(ctx, incoming.text, rows)
        messages = [{"role": "system", "content": parts.system}, *parts.history]
        with_parts(messages, incoming.parts)
        # Earlier turns' pages, this message's files: read when something asks (Seen.sources).
        ctx.state(SEEN).prompt = list(messages)
        run = _Run(self, ctx, incoming, events, turns, parts, messages, used)
        cap = MAX_TOOL_CALLS
        failed: set[tuple[str, str]] = set()  # (tool, arguments) of the calls that failed
        tools = run.tools

        async def starts(c: LLMToolCall) -> None:  # a writing call: kept until its round is
            await self.conversation.record_in_flight(run.turn, self.clock(), called, c.id)

        while True:
            if cut_round is None:
                asked = await run.ask()
                if isinstance(asked, Reply):
                    return asked
                called, calls = asked
                if (earlier := done_before(tools, calls, run.succeeded)) is not None:
                    # Its results are in hand and the model asks for them again: it will not
                    # answer from them, so the person reads what they were, not a rerun.
                    return await run.answer("", nothing_said(run.ran, earlier))
            else:
                called, calls = cut_round, [LLMToolCall.of(w) for w in cut_round["tool_calls"]]
            cut_round, cut, cut_calls = None, cut_calls, frozenset()
            content, wire = called["content"] or "", called["tool_calls"]
            messages.append(called)
            if events.on_tools is not None and run.used < cap:
                await events.on_tools([c.name for c in calls[: cap - run.used]])
            results = await run_round(
                tools, ctx, calls, content, used=run.used, cap=cap, gate=self.gate,
                on_start=starts, cut=cut,
            )  # fmt: skip
            run.ran_round(calls, results, cap)
            await self.conversation.record_tool_round(
                run.turn, self.clock(), content, wire, results, run.record_writes()
            )
            await turns.on_tool_round(ToolRound(ctx, content, wire, calls, results))
            messages += [
                {"role": "tool", "tool_call_id": r.call_id, "content": r.text} for r in results
            ]
            if run.used >= cap:
                return await run.answer(
                    f"I stopped this task after {run.used} tool calls (the limit for one message "
                    f"is {cap}). Tell me to continue if you want me to go on."
                )
            if (stop := repeated_failure(results, failed)) is not None:
                return await run.answer(stop)

    async def build_prompt(
        self, ctx: RequestContext, text: str, rows: Sequence[HistoryRow]
    ) -> PromptParts:
        # Recall and history are independent reads: run them side by side.
        sections, history = await asyncio.gather(
            provided_sections(self.context_providers, ctx, text), self.fit(ctx, rows)
        )
        now = ctx.now().astimezone(ctx.timezone)
        # Stable system prompt first (cacheable); time and recall ride in the newest turn.
        system = system_prompt(ctx.user_name, self.registry.prompt_lines())
        block = context_block(now, sections)
        return PromptParts(system, sections, with_context(history, block))

    async def fit(self, ctx: RequestContext, rows: Sequence[HistoryRow]) -> list[dict[str, Any]]:
        """The history the prompt shows: a feature's window, else the newest turns read
        with the message that fit the budget."""
        if self.history is not None:
            return await self.history.fit(ctx, self.llm, rows)
        budget = history_budget(self.settings, await context_size(self.llm))
        return trim_history([to_openai(r) for r in rows], budget)


class _Run:
    """One request's loop state: the messages so far, what ran, what the wrappers said; and
    the two ways a model round ends it (an answer) or goes on (calls to run)."""

    def __init__(
        self,
        agent: Agent,
        ctx: RequestContext,
        incoming: Incoming,
        events: Events,
        turns: TurnChain,
        parts: PromptParts,
        messages: list[dict[str, Any]],
        used: int,
    ) -> None:
        self.agent, self.ctx, self.incoming, self.events, self.turns = (
            agent, ctx, incoming, events, turns
        )  # fmt: skip
        self.parts, self.messages, self.used = parts, messages, used
        self.turn = Turn(ctx.session_id, ctx.user_id, ctx.request_id)
        self.tools = agent.registry.for_request(ctx, incoming.text)
        self.model = turns.model()  # e.g. the user's /model pick
        self.llm = agent.model_for(bool(incoming.parts))
        self.rounds = 0
        self.ran: list[str] = []  # the tools this request called, for an empty answer's line
        self.last: Sequence[ToolResult] = []  # the last round's results, for the same
        self.said: list[str] = []  # what the model wrappers said of the calls
        # Calls that ran without an error since the last write, with their results.
        self.succeeded: list[tuple[LLMToolCall, ToolResult]] = []
        self.asked_again = False  # a reply that was no answer is asked once more
        # Kept with the turn as first sent (in its first record): each later request extends
        # this one byte for byte, and a provider's prefix cache re-reads only what is new.
        block = sent_context(parts.history)
        self.keep = None
        if block is not None and ctx.trigger_message_id is not None:
            self.keep = kept_context(ctx.trigger_message_id, block)

    def ran_round(self, calls: list[LLMToolCall], results: list[ToolResult], cap: int) -> None:
        self.said += [cut_line(r.name) for r in results if r.error == CUT]
        self.used = min(cap, self.used + len(calls))
        self.ran += [c.name for c in calls]
        self.last = results
        by_id = {r.call_id: r for r in results if r.ok}
        ok = [(c, by_id[c.id]) for c in calls if c.id in by_id]
        # After a write, a read of before may find something else: only calls since count.
        wrote = any(writes(self.tools, c) for c, _ in ok)
        self.succeeded = ok if wrote else self.succeeded + ok

    def record_writes(self) -> list[RecordWrite]:
        first, self.keep = self.keep, None
        return [*([first] if first else []), *self.turns.writes(self.ctx)]

    async def answer(self, text: str, cut: str = "", notes: bool = True) -> Reply:
        ctx, turns = self.ctx, self.turns
        await self.agent.conversation.record_answer(
            self.turn, self.agent.clock(), text, self.record_writes()
        )
        await turns.on_answer(ctx, text)
        lines = cut + "".join(f"\n\n{n}" for n in self.said) + (turns.notes() if notes else "")
        return Reply(text + lines, ctx.request_id, ctx.session_id, self.used, notes=lines)

    def meant(self, quoted: list[LLMToolCall]) -> str | None:
        """What to tell the model when its reply wrote calls among its words that it meant
        to make: its own calls, in a turn that has read nothing from outside (a call copied
        from someone's text, or written after a page was read, was explained, not meant:
        asked again, the model would make it)."""
        if not quoted or self.ctx.state(SEEN).sources:
            return None
        if any(copied(c.name, c.arguments, self.messages) for c in quoted):
            return None
        return ask_again([c.name for c in quoted])

    async def ask(self) -> Reply | tuple[dict[str, Any], list[LLMToolCall]]:
        """One model round: the answer (the turn ends), or the assistant message with the
        calls to run."""
        ctx, turns, events, messages = self.ctx, self.turns, self.events, self.messages
        while True:
            req = ModelRequest(ctx, messages, self.tools.schemas(), self.parts, self.rounds)
            try:
                await turns.on_model_request(req)
            except HookRefusal as refusal:
                return await self.answer(str(refusal), notes=False)
            # Template markup the model wrote as text is never shown (bot/agent/markup.py):
            # the drafts pass through the same recogniser as the answer.
            results = bool(self.ran)
            drafts = Drafts(events.on_text, results=results) if events.on_text else None
            completion = await self.llm.stream(
                messages, req.tools or None, drafts, model=self.model, on_wait=events.on_wait
            )
            await turns.on_model_response(req, completion)
            self.said += [n for n in completion.notes if n not in self.said]
            self.rounds += 1
            calls, raw = completion.tool_calls, completion.content
            completion.content = shown(raw, results=results)
            if calls:
                if completion.written:  # a call copied from someone's text asks first
                    ctx.state(SEEN).written(calls, messages)
                # turn_fields: the reasoning, where the provider needs it back with the calls.
                called = {"role": "assistant", "content": completion.content or None,
                          "tool_calls": wire_calls(calls), **completion.turn_fields()}  # fmt: skip
                return called, calls
            text = completion.content
            why = failure(raw, text, self.incoming.text)
            again = ASK_AGAIN[why] if why is not None else None
            if again is None and not self.asked_again:
                # Not shown as an answer when the model can do better: a call it meant to
                # make, an answer it copied from an earlier turn (shown if it comes again).
                again = self.meant(completion.quoted)
                # The earlier answers are read where one could be copied: until a reply is
                # asked again, the messages hold this turn's calls and results beside them.
                if again is None and copies(text, self.incoming.text, answered(messages)):
                    again = ASK_AGAIN["copy"]
            if again is not None and not self.asked_again:
                # A failed call, as a tool's error is: said to the model, asked once.
                self.asked_again = True
                messages += [
                    {"role": "assistant", "content": UNREAD},
                    {"role": "user", "content": again},
                ]
                continue
            if why in GAVE_UP:
                text, lost = "", GAVE_UP[why]
            else:
                lost = nothing_said(self.ran, self.last) if not text else ""
            # An empty answer is recorded as it was, empty: a small model copies a stored
            # placeholder into every later answer. The person reads which tools ran.
            return await self.answer(text, lost + completion.cut_note)
