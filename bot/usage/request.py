"""The usage feature's hooks on one agent request (tools/hooks.py): what it used.

- Metering: the user's model, the usage row with each stored answer, and the lines added
  under the answer; Budgeted adds the budget check before each model call where a budget
  or cap is set. UsageTurns (declared in bot/usage/feature.py) reads the user's own usage
  columns as the request begins and makes each request's Metering.
- ContextAccounting: /context's bookkeeping, the token split of each user's last request,
  kept in the ContextLog it writes (this feature's part, CONTEXT_LOG, which /context reads).
"""

from __future__ import annotations

import json
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, update

from bot.agent.prompt import without_context
from bot.usage import repo
from bot.usage.meter import Meter, Totals, parse_warned
from db.conversation import RecordWrite
from db.models.core import User
from tools.base import RequestContext
from tools.chat import Completion
from tools.hooks import HookRefusal, ModelRequest, TurnHooks
from tools.model_call import ModelCall
from tools.state import Key
from tools.tokens import count_payload, count_text


@dataclass
class RequestUsage:
    call: ModelCall
    model: str | None  # the user's pick; None: LLM_MODEL
    footer: bool
    warned: dict[str, str]
    totals: Totals = field(default_factory=Totals)
    notes: list[str] = field(default_factory=list)  # fallback notices, budget warnings


# The budget warnings given this period, kept on the user's row.
_WARNED = (
    update(User).where(User.id == bindparam("user_id")).values(usage_warned=bindparam("marks"))
)


@dataclass
class UsageTurns:
    """Metering for the agent's requests (tools/hooks.py RequestHooks)."""

    meter: Meter
    models: list[str]  # what /model may pick (the default model first, then the others)

    async def begin(self, ctx: RequestContext) -> Metering:
        meter = self.meter
        user = await meter.user_usage(ctx.user_id)
        usage = RequestUsage(
            call=ModelCall(ctx.purpose, ctx.user_id, ctx.session_id, ctx.request_id),
            model=user.llm_model if user.llm_model in self.models else None,
            footer=bool(user.usage_footer),
            # The warnings already given matter only where a budget or cap can warn.
            warned=parse_warned(user.usage_warned) if meter.budgeted else {},
        )
        return (Budgeted if meter.budgeted else Metering)(meter, usage)


@dataclass
class Metering(TurnHooks):
    """One request's metering, as its turn hooks: the user's model, each call's usage row
    handed to the transaction that records its answer, and the notes (fallbacks, budget
    warnings, the usage footer)."""

    meter: Meter
    ru: RequestUsage
    # Calls made since the last record: (messages as sent, tools as sent, completion).
    pending: list[tuple[list[dict[str, Any]], list[dict[str, Any]], Completion]] = field(
        default_factory=list
    )

    async def on_model_response(self, req: ModelRequest, completion: Completion) -> None:
        # A copy: the loop appends to the same list after the call.
        self.pending.append((list(req.messages), req.tools, completion))

    def model(self) -> str | None:
        return self.ru.model  # the user's /model pick

    def record_writes(self, ctx: RequestContext) -> list[RecordWrite]:
        """The usage rows of the calls made since the last record, and the user's budget
        warnings, for the transaction that records their answer (db/conversation.py)."""
        rows: list[dict[str, Any]] = []
        warned = False
        for messages, tools, out in self.pending:
            row, warns = after_call(self.meter, ctx, self.ru, out, messages, tools or None)
            rows.append(row)
            warned = warned or warns
        self.pending.clear()
        writes = [RecordWrite(repo.INSERT, rows)]
        if warned:
            marks = json.dumps(self.ru.warned)
            writes.append(RecordWrite(_WARNED, [{"user_id": ctx.user_id, "marks": marks}]))
            self.meter.warned(ctx.user_id, marks)
        return writes

    def notes(self) -> str:
        """Text to append to the answer the user sees (never stored in the history)."""
        lines = [f"ℹ️ {n}" for n in self.ru.notes]
        if self.ru.footer and self.ru.totals.calls:
            lines.append(f"📊 {self.ru.totals.footer()}")
        return "\n\n" + "\n".join(lines) if lines else ""


class Budgeted(Metering):
    """Metering where a budget or cap is set: it is checked before every model call, and
    none is made once it is used up (without one, the request has nothing to check)."""

    async def on_model_request(self, req: ModelRequest) -> None:
        refusal = await self.meter.refusal(req.ctx.user_id)
        if refusal is not None:
            raise HookRefusal(refusal)


def after_call(
    meter: Meter,
    ctx: RequestContext,
    ru: RequestUsage,
    out: Completion,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
) -> tuple[dict[str, Any], bool]:
    """One call's usage row, and whether a budget warning (once per period) was added, for
    the transaction that stores the call's answer to write."""
    row, usage, cost = meter.usage_row(ru.call, out, messages, tools)
    ru.totals.add(usage, cost)
    if out.fallback_from:
        why = f" ({out.fallback_reason})" if out.fallback_reason else ""
        note = f"{out.fallback_from} is not answering{why}; this answer is from {out.model}."
        if note not in ru.notes:
            ru.notes.append(note)
    if not meter.budgeted:
        return row, False
    warnings = meter.warnings(ctx.user_id, ru.warned)
    ru.notes.extend(warnings)
    return row, bool(warnings)


@dataclass
class ContextSplit:
    at: datetime
    system: int  # the system prompt without the recalled sections
    memory: int  # sections added by context providers (memory recall, ...)
    history: int  # the conversation sent along, including this message
    tools: int  # the tools payload of the last model call
    tool_names: list[str] = field(default_factory=list)

    @property
    def total(self) -> int:
        return self.system + self.memory + self.history + self.tools


def split_of(
    system: str, sections: list[str], history: list[dict[str, Any]], tools_tokens: int, at: datetime
) -> ContextSplit:
    """The token split of one request: the system prompt (with `sections`, the recalled
    memory, counted apart), the history sent along, and the tools payload."""
    memory = sum(count_text(s) for s in sections)
    history_tokens = 0
    for m in history:
        content = m.get("content") or ""
        history_tokens += count_text(content if isinstance(content, str) else str(content))
        if m.get("tool_calls"):
            history_tokens += count_text(str(m["tool_calls"]))
    return ContextSplit(
        at=at,
        system=max(0, count_text(system) - memory),
        memory=memory,
        history=history_tokens,
        tools=tools_tokens,
    )


# What one request's prompt was built from, made only when counted: the system prompt with
# the recalled sections, the sections, and the history as the user wrote it.
Prompt = Callable[[], tuple[str, list[str], list[dict[str, Any]]]]


def _none() -> tuple[str, list[str], list[dict[str, Any]]]:
    return "", [], []


@dataclass
class _Request:
    """One request's prompt and its latest call's tools, counted only when someone asks:
    counting (and even assembling) every request's prompt kept the tokenizer resident and
    cost time per message, growing with the session."""

    at: datetime
    prompt: Prompt
    tools: list[dict[str, Any]] = field(default_factory=list)
    split: ContextSplit | None = None  # once counted (or evicted), the figures alone

    def counted(self) -> ContextSplit:
        if self.split is None:
            self.split = split_of(*self.prompt(), 0, self.at)
            self.prompt = _none
        self.split.tools = count_payload(self.tools)
        self.split.tool_names = [t["function"]["name"] for t in self.tools]
        return self.split


class ContextLog:
    """Per user, the last request; kept in memory (it is a diagnostic). The prompts of the
    KEEP most recent users wait uncounted; an older one's is counted when it drops out, so
    memory stays bounded and every user's figures stay those of their last request."""

    KEEP = 256

    def __init__(self) -> None:
        self._last: dict[int, _Request] = {}
        self._uncounted: OrderedDict[int, None] = OrderedDict()  # oldest first

    def record(self, user_id: int, at: datetime, prompt: Prompt) -> None:
        """A new request's prompt (at its first model call)."""
        self._last[user_id] = _Request(at, prompt)
        self._uncounted[user_id] = None
        self._uncounted.move_to_end(user_id)
        if len(self._uncounted) > self.KEEP:
            oldest, _ = self._uncounted.popitem(last=False)
            self._last[oldest].counted()

    def has(self, user_id: int) -> bool:
        return user_id in self._last

    def set_tools(self, user_id: int, schemas: list[dict[str, Any]]) -> None:
        """The tools payload of the request's latest model call, counted when asked."""
        self._last[user_id].tools = schemas

    def get(self, user_id: int) -> ContextSplit | None:
        req = self._last.get(user_id)
        if req is None:
            return None
        self._uncounted.pop(user_id, None)
        return req.counted()


CONTEXT_LOG: Key[ContextLog] = Key("usage.context_log")


@dataclass
class ContextAccounting(TurnHooks):
    """/context's bookkeeping: the token split of each user's last request."""

    log: ContextLog

    async def on_model_request(self, req: ModelRequest) -> None:
        # Only kept here; ContextLog assembles and counts when /context asks (the prompt
        # once per request, the tools payload of the latest call).
        user, p = req.ctx.user_id, req.parts
        if not (req.turn and self.log.has(user)):

            def prompt() -> tuple[str, list[str], list[dict[str, Any]]]:
                # The recalled sections ride in the newest user turn (bot/agent/prompt.py):
                # counted as memory, not as history, as when they sat in the system prompt.
                history = [
                    {**m, "content": without_context(m["content"])} if m["role"] == "user" else m
                    for m in p.history
                ]
                return "\n\n".join([p.system, *p.sections]), p.sections, history

            self.log.record(user, req.ctx.now(), prompt)
        self.log.set_tools(user, req.tools)
