"""Agent hooks: what happens around the loop without living inside it.

In the spirit of openai-agents' RunHooks: the runner calls a few hooks at fixed points
(before and after each model call, after each tool round, with the final answer), and
recording, /context accounting and usage hang on them instead of side channels.
A hook that raises HookRefusal before a model call stops the request with its text.

Features reach the loop only through what is declared here (besides the approvals gate, the
toolset and the context providers): a RequestHooks makes each request's TurnHooks, which
the loop asks for the model, the rows to record, the lines under the answer and the work
after it; a TurnPolicy says when an open session's period is over.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

from db.conversation import PeriodOver, ToolResult, TurnUser, UsageWrites
from tools.base import RequestContext
from tools.chat import Completion, LLMToolCall
from tools.model_call import Purpose

# Work that waits until the adapter has delivered the reply.
Followup = Callable[[], Awaitable[None]]


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


class AgentHooks:
    """Every hook is optional: override what you need."""

    async def on_model_request(self, req: ModelRequest) -> None:
        return None

    async def on_model_response(self, req: ModelRequest, completion: Completion) -> None:
        return None

    async def on_tool_round(self, round_: ToolRound) -> None:
        return None

    async def on_answer(self, ctx: RequestContext, answer: str) -> None:
        return None


@dataclass
class HookChain(AgentHooks):
    """Hooks run in order; the first to raise stops the rest."""

    hooks: list[AgentHooks] = field(default_factory=list)

    async def on_model_request(self, req: ModelRequest) -> None:
        for h in self.hooks:
            await h.on_model_request(req)

    async def on_model_response(self, req: ModelRequest, completion: Completion) -> None:
        for h in self.hooks:
            await h.on_model_response(req, completion)

    async def on_tool_round(self, round_: ToolRound) -> None:
        for h in self.hooks:
            await h.on_tool_round(round_)

    async def on_answer(self, ctx: RequestContext, answer: str) -> None:
        for h in self.hooks:
            await h.on_answer(ctx, answer)


class TurnHooks(AgentHooks):
    """One request's part of a feature, made when the request starts (RequestHooks.begin):
    AgentHooks' fixed points, and what the loop asks of it. Every member is optional."""

    def model(self) -> str | None:
        """The model to ask for this request; None: the configured one."""
        return None

    def record_writes(self, ctx: RequestContext) -> UsageWrites | None:
        """Rows to write in the transaction of the next record (a tool round or the answer),
        for what happened since the previous one."""
        return None

    def notes(self) -> str:
        """Lines under the answer the user sees (never stored in the history)."""
        return ""

    async def after_answer(self, ctx: RequestContext) -> Followup | None:
        """Called once the answer is stored, before the reply goes out; what it returns runs
        after the adapter delivered the reply. Must not raise: the reply goes out anyway."""
        return None


class RequestHooks(Protocol):
    """A feature's per-request hooks: None when it has nothing to do for this request."""

    def begin(self, ctx: RequestContext, user: TurnUser, purpose: Purpose) -> TurnHooks | None:
        """Called with the user's row as the turn began (no extra query)."""
        ...


class TurnPolicy(Protocol):
    def period_over(self, now: datetime) -> PeriodOver:
        """For the turn beginning at `now`: whether an open session (started when, in which
        time zone) belongs to a period that is over, so the message opens a new one."""
        ...


class NoPeriods:
    """The TurnPolicy without periods: a session lasts until it is closed."""

    def period_over(self, now: datetime) -> PeriodOver:
        return _never


def _never(started: datetime, tz_name: str | None) -> bool:
    return False


@dataclass
class TurnChain:
    """The requests' TurnHooks asked together, in the order the features were listed."""

    turns: list[TurnHooks]

    @classmethod
    def begin(
        cls, requests: Sequence[RequestHooks], ctx: RequestContext, user: TurnUser, purpose: Purpose
    ) -> TurnChain:
        begun = (r.begin(ctx, user, purpose) for r in requests)
        return cls([t for t in begun if t is not None])

    def model(self) -> str | None:
        return next((m for t in self.turns if (m := t.model()) is not None), None)

    def record_writes(self, ctx: RequestContext) -> UsageWrites | None:
        writes = [w for t in self.turns if (w := t.record_writes(ctx)) is not None]
        if len(writes) > 1:  # db/conversation.py records one feature's rows with a turn
            raise RuntimeError("more than one feature writes rows with a record")
        return writes[0] if writes else None

    def notes(self) -> str:
        return "".join(t.notes() for t in self.turns)

    async def after_answer(self, ctx: RequestContext) -> Followup | None:
        later = [f for t in self.turns if (f := await t.after_answer(ctx)) is not None]
        if len(later) <= 1:
            return later[0] if later else None

        async def each() -> None:
            for f in later:
                await f()

        return each
