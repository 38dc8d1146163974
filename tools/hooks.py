"""The waist's hooks: how a feature takes part in one agent request without the loop naming it.

In the spirit of nanobot's AgentHook and openai-agents' RunHooks: the loop (bot/agent/runner.py)
calls a few fixed points (before and after each model call, after each tool round, with the
final answer) and asks what it needs (the model to use, the rows to record, the lines under
the answer, the files to send, the work after it). A feature declares (tools/feature.py):

- `turns`: a RequestHooks, which makes each request's TurnHooks (None: nothing to do for it);
- `gates`: a Gate every tool call passes before it runs (approvals);
- `wraps`: a model wrapper (tools/chat.py ModelWrapper: metering, the vision gate);
- its typed per-request state, as `Slot`s on the RequestContext (tools/base.py).

A TurnHooks with nothing to do until a slot is held names it (`when`): until then the loop does
not call it. The slot is filled by the feature's own tool, or, for what happens to a chat from
outside the request (the owner removed it), by the event through `Marks`.

A hook that raises HookRefusal before a model call stops the request with its text.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar, Protocol
from weakref import ReferenceType, ref

from db.conversation import HistoryRow, PeriodOver, RecordWrite, ToolResult
from tools.base import RequestContext, Tool, ToolCall
from tools.chat import ChatModel, Completion, LLMToolCall
from tools.state import Key, Slot

log = logging.getLogger(__name__)

# A file sent with the reply: (name, content).
File = tuple[str, bytes]


@dataclass(frozen=True)
class ReplyButton:
    """A button under the answer, where the adapter shows buttons (Telegram): its press
    goes to `feature`'s press with `data`, as a command answer's buttons do."""

    feature: str
    label: str
    data: str


@dataclass
class PromptParts:
    """What the prompt was built from (for /context's split)."""

    system: str
    sections: list[str]
    history: list[dict[str, Any]]


@dataclass
class ModelRequest:
    ctx: RequestContext
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    parts: PromptParts
    turn: int  # 0 for the first model call of the request


@dataclass
class ToolRound:
    """One assistant message with tool calls, and what each call returned."""

    ctx: RequestContext
    content: str
    wire_calls: list[dict[str, Any]]
    calls: list[LLMToolCall]
    outcomes: list[ToolResult]


class HookRefusal(Exception):
    """Raised by a hook to stop a request before a model call; the text is the answer."""


class TurnHooks:
    """One request's part of a feature. Every member is optional: override what you need.

    `when` names the slots only this feature's tools fill (the files a run wrote, the
    reminders a call set): until the request holds one of them, the loop does not call the
    hooks at all, so a message that used none of the feature costs it nothing. Empty: every
    request, from its first model call."""

    when: ClassVar[tuple[Slot[Any], ...]] = ()

    async def on_model_request(self, req: ModelRequest) -> None:
        return None

    async def on_model_response(self, req: ModelRequest, completion: Completion) -> None:
        return None

    async def on_tool_round(self, round_: ToolRound) -> None:
        return None

    async def on_answer(self, ctx: RequestContext, answer: str) -> None:
        """Called once the answer is stored, before the reply goes out. Must not raise, nor
        make the person wait: what takes long (a summary) starts in the background."""
        return None

    def model(self) -> str | None:
        """The model to ask for this request; None: the configured one."""
        return None

    def record_writes(self, ctx: RequestContext) -> list[RecordWrite]:
        """Rows to write in the transaction of the next record (a tool round or the answer),
        for what happened since the previous one."""
        return []

    def notes(self) -> str:
        """Lines under the answer the user sees (never stored in the history)."""
        return ""

    def files(self, ctx: RequestContext) -> list[File]:
        """Files to send with the answer (what code wrote to ./output/)."""
        return []

    def buttons(self, ctx: RequestContext) -> list[ReplyButton]:
        """Buttons under the answer (Undo for what the request created)."""
        return []


class RequestHooks(Protocol):
    """A feature's per-request hooks: None when it has nothing to do for this request. It
    may read the feature's own rows here (one query of its own)."""

    async def begin(self, ctx: RequestContext) -> TurnHooks | None: ...


@dataclass
class Always:
    """RequestHooks that hand every request the same TurnHooks (it keeps no per-request
    state: /context's bookkeeping)."""

    hooks: TurnHooks

    async def begin(self, ctx: RequestContext) -> TurnHooks | None:
        return self.hooks


class Gate(Protocol):
    """Before a tool call runs: None lets it run, a text is what the model gets instead."""

    async def check(
        self, tool: Tool[Any], params: Any, args: dict[str, Any], call: ToolCall
    ) -> str | None: ...


@dataclass(frozen=True)
class Only:
    """A gate for the calls of some tools only (those whose params are one of `params`):
    every other call passes without asking it, so a message whose tools it has nothing to
    say about never enters it."""

    params: tuple[type[Any], ...]
    gate: Gate

    async def check(
        self, tool: Tool[Any], params: Any, args: dict[str, Any], call: ToolCall
    ) -> str | None:
        if not isinstance(params, self.params):
            return None
        return await self.gate.check(tool, params, args, call)


class TurnPolicy(Protocol):
    def period_over(self, now: datetime) -> PeriodOver:
        """For the turn beginning at `now`: whether an open session (started when, in which
        time zone) belongs to a period that is over, so the message opens a new one."""
        ...


class History(Protocol):
    """The history a prompt shows: the turns read with the message, fitted to what the
    model's context leaves (a feature may compress the oldest: bot/sessions)."""

    async def fit(
        self, ctx: RequestContext, llm: ChatModel, rows: Sequence[HistoryRow]
    ) -> list[dict[str, Any]]: ...


# What at most one feature provides for the loop (tools/feature.py Provide); without it the
# loop's own plain behaviour stands (bot/agent/runner.py).
PERIODS: Key[TurnPolicy] = Key("periods")
HISTORY: Key[History] = Key("history")


# Open sessions' period ends remembered per process (by start and zone name).
ENDS_KEPT = 10_000


class Calendar(Protocol):
    def period_end(self, started: datetime, tz_name: str | None) -> datetime | None:
        """When the period of a session that started at `started`, for a user in `tz_name`
        (None: the default zone), ends; None: it never does."""
        ...


@dataclass
class Periods:
    """The TurnPolicy of a feature that splits conversations into periods (bot/sessions):
    each open session's period end is asked of its `calendar` once, when the session (or
    its user's zone) is new here, and kept, so a message in a session whose end is known is
    checked by comparing two instants, without entering the feature."""

    calendar: Calendar
    _ends: dict[tuple[datetime, str | None], datetime | None] = field(
        default_factory=dict, repr=False
    )

    def period_over(self, now: datetime) -> PeriodOver:
        def over(started: datetime, tz_name: str | None) -> bool:
            # A failing check answers False: the message is answered in the current session
            # rather than not at all.
            try:
                end = self._end(started, tz_name)
            except Exception:
                log.exception("checking whether the session period ended failed")
                return False
            return end is not None and end <= now

        return over

    def _end(self, started: datetime, tz_name: str | None) -> datetime | None:
        key = (started, tz_name)
        if key not in self._ends:
            if len(self._ends) >= ENDS_KEPT:
                self._ends.clear()
            self._ends[key] = self.calendar.period_end(started, tz_name)
        return self._ends[key]


class NoPeriods:
    """The TurnPolicy without periods: a conversation lasts until it is closed."""

    def period_over(self, now: datetime) -> PeriodOver:
        return _never


def _never(started: datetime, tz_name: str | None) -> bool:
    return False


class Marks:
    """What happened to a chat that some hook waits for (the owner removed it): the event
    sets a slot on the chat's requests, those in flight and those begun after it, so a
    TurnHooks that acts only then names the slot (`when`) and no request asks it at every
    model call whether it happened. One per app; the loop hands it every request it begins."""

    def __init__(self) -> None:
        self._marked: dict[int, list[Slot[Any]]] = {}  # chat id -> the slots its requests get
        # Each chat's requests begun and not yet dropped (a RequestContext has no hash).
        self._live: dict[int, list[ReferenceType[RequestContext]]] = {}

    def begin(self, ctx: RequestContext) -> None:
        chat = ctx.chat_id
        if chat is None:  # the terminal's local user: no chat an event can name
            return
        live = [r for r in self._live.get(chat, ()) if r() is not None]
        live.append(ref(ctx))
        self._live[chat] = live
        for slot in self._marked.get(chat, ()):
            ctx.state(slot)

    def mark(self, chat_id: int, slot: Slot[Any]) -> None:
        """Every request of `chat_id`, in flight or begun from now on, holds `slot`."""
        slots = self._marked.setdefault(chat_id, [])
        if slot not in slots:
            slots.append(slot)
        for r in self._live.get(chat_id, ()):
            if (ctx := r()) is not None:
                ctx.state(slot)


# The app's Marks (bot/app.py hands it over): how a feature reaches its requests by chat.
MARKS: Key[Marks] = Key("chat.marks")


@dataclass
class TurnChain(TurnHooks):
    """The requests' TurnHooks asked together, in the order the features were listed; the
    first to raise stops the rest. A hook whose `when` slots the request does not hold yet
    is left out of each call."""

    ctx: RequestContext
    turns: list[TurnHooks] = field(default_factory=list)
    # The live hooks for as many slots held: a request's slots are only ever added.
    _live_at: tuple[int, list[TurnHooks]] = field(default=(-1, []), init=False, repr=False)

    @classmethod
    async def begin(
        cls, requests: Sequence[RequestHooks], ctx: RequestContext, marks: Marks | None = None
    ) -> TurnChain:
        if marks is not None:
            marks.begin(ctx)
        # Always's hooks are the same for every request: taken as they are, not asked.
        begun = [r.hooks if isinstance(r, Always) else await r.begin(ctx) for r in requests]
        return cls(ctx, [t for t in begun if t is not None])

    def _live(self) -> list[TurnHooks]:
        held = self.ctx.held()
        if self._live_at[0] != len(held):
            live = [t for t in self.turns if not t.when or not held.isdisjoint(t.when)]
            self._live_at = (len(held), live)
        return self._live_at[1]

    async def on_model_request(self, req: ModelRequest) -> None:
        for t in self._live():
            await t.on_model_request(req)

    async def on_model_response(self, req: ModelRequest, completion: Completion) -> None:
        for t in self._live():
            await t.on_model_response(req, completion)

    async def on_tool_round(self, round_: ToolRound) -> None:
        for t in self._live():
            await t.on_tool_round(round_)

    async def on_answer(self, ctx: RequestContext, answer: str) -> None:
        for t in self._live():
            await t.on_answer(ctx, answer)

    def model(self) -> str | None:
        return next((m for t in self._live() if (m := t.model()) is not None), None)

    def writes(self, ctx: RequestContext) -> list[RecordWrite]:
        """Every feature's rows for the next record, all in its one transaction."""
        return [w for t in self._live() for w in t.record_writes(ctx)]

    def notes(self) -> str:
        return "".join(t.notes() for t in self._live())

    def files(self, ctx: RequestContext) -> list[File]:
        return [f for t in self._live() for f in t.files(ctx)]

    def buttons(self, ctx: RequestContext) -> list[ReplyButton]:
        return [b for t in self._live() for b in t.buttons(ctx)]


@dataclass
class Gates:
    """The gates in the order the features were listed; the first refusal stands."""

    gates: list[Gate] = field(default_factory=list)

    async def check(
        self, tool: Tool[Any], params: Any, args: dict[str, Any], call: ToolCall
    ) -> str | None:
        for gate in self.gates:
            if (refusal := await gate.check(tool, params, args, call)) is not None:
                return refusal
        return None
