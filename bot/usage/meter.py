"""Metering, and what each request used: budgets checked before each model call, usage
recorded after it; a request's token split kept for /context.

The totals the budgets are checked against are read from the database at most once a
minute and kept up to date in process in between, so the check before a model call costs
no database round trip; the re-read picks up what another process (a `sidekick chat`
beside the bot) spent. Every call is metered here, each the way it is made: the chat's
through its request's turn hooks (Metering: the usage row goes into the transaction that
stores the answer), the plain completions (summaries, code generation) through MeteredModel,
the model wrapped in this meter, and the code tool's relay through CallMetering: a reader
following how a call is metered finds all three beside the Meter they feed. The chat's
other hook, ContextAccounting, keeps the token split of each user's last request
(ContextLog), which /context reads.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from sqlalchemy import bindparam, update
from sqlalchemy.ext.asyncio import AsyncSession

from bot.agent.prompt import without_context
from bot.usage import repo
from bot.usage.estimate import estimate
from bot.usage.settings import PriceTable, UsageSettings
from db.conversation import RecordWrite
from db.engine import SessionFactory
from db.models.core import User
from tools.base import Clock, RequestContext
from tools.chat import ChatModel, Completion, ModelWrapper, Usage
from tools.hooks import HookRefusal, ModelRequest, TurnHooks
from tools.model_call import BudgetExceeded, ModelCall
from tools.state import Kept, Key
from tools.tokens import count_payload, count_text

log = logging.getLogger(__name__)

WARN_AT = 0.8
RELOAD_AFTER = timedelta(minutes=1)


def period_starts(now: datetime, tz: ZoneInfo) -> tuple[datetime, datetime]:
    """(start of today, start of this month) in `tz`, as aware datetimes."""
    local = now.astimezone(tz)
    day = local.replace(hour=0, minute=0, second=0, microsecond=0)
    return day, day.replace(day=1)


def usd(value: float) -> str:
    """$12.34, $0.012, $0.0004: cents for large sums, four decimals at most for small."""
    if value >= 1 or value == 0:
        return f"${value:.2f}"
    if value < 0.0001:
        return "<$0.0001"
    text = f"{value:.4f}".rstrip("0")
    return "$" + (text if len(text.split(".")[1]) >= 2 else f"{value:.2f}")


@dataclass
class Totals:
    """A request's calls added up (the footer)."""

    calls: int = 0
    prompt: int = 0
    completion: int = 0
    cached: int = 0
    estimated: bool = False
    cost: float = 0.0
    unpriced: bool = False

    def add(self, u: Usage, cost: float | None) -> None:
        self.calls += 1
        self.prompt += u.prompt_tokens
        self.completion += u.completion_tokens
        self.cached += u.cached_tokens
        self.estimated |= u.estimated
        if cost is None:
            self.unpriced = True
        else:
            self.cost += cost

    def footer(self) -> str:
        approx = "≈" if self.estimated else ""
        cost = "cost unknown" if self.unpriced and not self.cost else usd(self.cost)
        if self.unpriced and self.cost:
            cost += " + unpriced calls"
        return f"{approx}{self.prompt:,} tokens in · {approx}{self.completion:,} out · {cost}"


@dataclass
class Limit:
    key: str  # day | month | user_day | user_month (also the key in users.usage_warned)
    used: float
    cap: float
    period: str  # "2026-11-23" or "2026-11": a warning is given once per period

    @property
    def share(self) -> float:
        return self.used / self.cap


class Meter:
    def __init__(
        self,
        settings: UsageSettings,
        session_factory: SessionFactory,
        clock: Clock,
        tz: ZoneInfo,
        prices: PriceTable | None = None,
    ) -> None:
        self.settings = settings
        self.sf = session_factory
        self.clock = clock
        self.tz = tz
        self.prices = prices or PriceTable.from_setting(settings.prices)
        # Read once (settings do not change while the app runs; each property parses its
        # setting): without a price list, the default, no call is priced, and without a
        # budget or cap the checks before and after each call have nothing to do.
        self.priced = bool(self.prices.prices)
        self.day_usd, self.month_usd = settings.daily_budget_usd, settings.monthly_budget_usd
        self.user_day = settings.user_daily_token_cap
        self.user_month = settings.user_monthly_token_cap
        self.budgeted = bool(self.day_usd or self.month_usd or self.user_day or self.user_month)
        # Users' usage columns as requests read them; /model and the footer drop one.
        self._users: Kept[repo.UserUsage] = Kept()
        self._spent: repo.Spent | None = None
        self._day: datetime | None = None
        self._loaded_at: datetime | None = None
        self._lock = asyncio.Lock()

    # -- the user's own columns -------------------------------------------------------

    async def user_usage(self, user_id: int) -> repo.UserUsage:
        user = self._users.get(user_id)
        if user is None:
            async with self.sf() as s:
                user = await repo.user_usage(s, user_id)
            self._users.put(user_id, user)
        return user

    def forget(self, user_id: int) -> None:
        """The user's /model or footer changed: the next request reads them again."""
        self._users.forget(user_id)

    def warned(self, user_id: int, marks: str) -> None:
        """The budget warnings a request gave, as it writes them to the user's row."""
        if (user := self._users.get(user_id)) is not None:
            self._users.put(user_id, replace(user, usage_warned=marks))

    # -- the totals ------------------------------------------------------------------

    async def spent(self) -> repo.Spent:
        """USD and tokens spent today and this month."""
        now = self.clock()
        day, month = period_starts(now, self.tz)

        def stale() -> bool:
            return (
                self._spent is None
                or self._day != day
                or self._loaded_at is None
                or not timedelta(0) <= now - self._loaded_at < RELOAD_AFTER
            )

        if stale():
            async with self._lock:
                if stale():
                    async with self.sf() as s:
                        self._spent = await repo.spent(s, day, month)
                    self._day, self._loaded_at = day, now
        assert self._spent is not None
        return self._spent

    def _add(self, user_id: int | None, tokens: int, cost: float | None) -> None:
        # Only once the totals are loaded: before that the row is in the database and the
        # first load counts it.
        if self._spent is None:
            return
        self._spent.day_usd += cost or 0.0
        self._spent.month_usd += cost or 0.0
        if user_id is not None:
            day, month = self._spent.user_tokens.get(user_id, (0, 0))
            self._spent.user_tokens[user_id] = (day + tokens, month + tokens)

    def limits(self, spent: repo.Spent, user_id: int | None) -> list[Limit]:
        local = self.clock().astimezone(self.tz)
        today, month = local.strftime("%Y-%m-%d"), local.strftime("%Y-%m")
        out = []
        if self.day_usd:
            out.append(Limit("day", spent.day_usd, self.day_usd, today))
        if self.month_usd:
            out.append(Limit("month", spent.month_usd, self.month_usd, month))
        day_tokens, month_tokens = spent.user_tokens.get(user_id, (0, 0)) if user_id else (0, 0)
        if self.user_day and user_id is not None:
            out.append(Limit("user_day", day_tokens, self.user_day, today))
        if self.user_month and user_id is not None:
            out.append(Limit("user_month", month_tokens, self.user_month, month))
        return out

    # -- before a call ---------------------------------------------------------------

    async def refusal(self, user_id: int | None) -> str | None:
        """One sentence when a budget or cap is used up (no model may be called), else None."""
        if not self.budgeted:
            return None
        spent = await self.spent()
        for limit in self.limits(spent, user_id):
            if limit.used >= limit.cap:
                return self._refusal_text(limit)
        return None

    def _refusal_text(self, limit: Limit) -> str:
        when = "after midnight" if limit.key in ("day", "user_day") else "on the 1st"
        zone = f" ({self.tz.key})"
        if limit.key == "day":
            what = f"Today's model budget of {usd(limit.cap)} is used up ({usd(limit.used)} spent)"
            var = "BUDGET_USD"
        elif limit.key == "month":
            what = f"This month's model budget of {usd(limit.cap)} is used up"
            var = "BUDGET_USD"
        elif limit.key == "user_day":
            what = f"You have used your {int(limit.cap):,} tokens for today"
            var = "USER_TOKEN_CAP"
        else:
            what = f"You have used your {int(limit.cap):,} tokens for this month"
            var = "USER_TOKEN_CAP"
        return (
            f"{what}, so I can't ask the model; I'll answer again {when}{zone}, "
            f"or sooner if the owner raises {var}."
        )

    # -- after a call ----------------------------------------------------------------

    def usage_of(
        self,
        out: Completion,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
    ) -> tuple[Usage, float | None]:
        usage = out.usage if out.usage is not None else estimate(messages, tools, out)
        if not self.priced:
            return usage, None
        cost = self.prices.cost(
            out.model, usage.prompt_tokens, usage.completion_tokens, usage.cached_tokens
        )
        return usage, cost

    def usage_row(
        self,
        call: ModelCall,
        out: Completion,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
    ) -> tuple[dict[str, Any], Usage, float | None]:
        """The call's model_usage row (usage.add_usage's keywords) for the caller to write
        in the transaction that stores its answer; the totals count it now."""
        usage, cost = self.usage_of(out, messages, tools)
        row = {
            "at": self.clock(),
            "user_id": call.user_id,
            "session_id": call.session_id,
            "request_id": call.request_id,
            "provider_id": (out.provider_id or "")[:200] or None,
            "purpose": call.purpose,
            "model": out.model[:200],
            "prompt_tokens": usage.prompt_tokens,
            "completion_tokens": usage.completion_tokens,
            "cached_tokens": usage.cached_tokens,
            "reasoning_tokens": usage.reasoning_tokens,
            "estimated": usage.estimated,
            "cost_usd": cost,
            "written_calls": out.written,
        }
        self._add(call.user_id, usage.prompt_tokens + usage.completion_tokens, cost)
        return row, usage, cost

    async def record(
        self,
        s: AsyncSession,
        call: ModelCall,
        out: Completion,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
    ) -> tuple[Usage, float | None]:
        """Add the call's usage row inside the caller's transaction; keep the totals."""
        row, usage, cost = self.usage_row(call, out, messages, tools)
        await repo.add_usage(s, **row)
        return usage, cost

    def warnings(self, user_id: int, warned: dict[str, str]) -> list[str]:
        """Lines for limits past WARN_AT not yet warned about this period; marks them in
        `warned` (the caller stores it)."""
        if self._spent is None:
            return []
        out = []
        for limit in self.limits(self._spent, user_id):
            if limit.share >= WARN_AT and warned.get(limit.key) != limit.period:
                warned[limit.key] = limit.period
                out.append(self._warning_text(limit))
        return out

    def _warning_text(self, limit: Limit) -> str:
        # One call can overshoot the cap: past it the line says "used up" with the real
        # figures, never a percentage above 100 nor a "100%" that the figures contradict.
        over = limit.used >= limit.cap
        pct = min(99, int(limit.share * 100))
        if limit.key in ("day", "month"):
            period = "today's" if limit.key == "day" else "this month's"
            amount = f"({usd(limit.used)} of {usd(limit.cap)})"
            if over:
                return f"Heads-up: {period} model budget is used up {amount}."
            return f"Heads-up: {pct}% of {period} model budget is used {amount}."
        period = "today" if limit.key == "user_day" else "this month"
        amount = f"({int(limit.used):,} of {int(limit.cap):,})"
        if over:
            return f"Heads-up: you have used up your tokens for {period} {amount}."
        return f"Heads-up: you have used {pct}% of your tokens for {period} {amount}."


def parse_warned(raw: str | None) -> dict[str, str]:
    try:
        data = json.loads(raw) if raw else {}
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}


# -- each call metered the way it is made: the chat's, plain completions, the relay's -----


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


UNATTRIBUTED = ModelCall("chat")


class MeteredModel(ModelWrapper):
    """The model, metered where a call says for whom and why (plain completions: summaries,
    code generation): budget checked first, usage recorded after, in its own transaction (these
    calls are off the chat's hot path).

    The chat's streams pass through: the request they belong to meters them (Metering above
    checks the budget before each model call and hands the usage row to the transaction
    that stores the answer), so metering them here too would count them twice.
    """

    def __init__(self, inner: ChatModel, meter: Meter) -> None:
        super().__init__(inner)
        self.meter = meter

    async def complete(
        self,
        messages: list[dict[str, Any]],
        max_tokens: int | None = None,
        *,
        model: str | None = None,
        call: ModelCall | None = None,
    ) -> Completion:
        call = call or UNATTRIBUTED
        refusal = await self.meter.refusal(call.user_id)
        if refusal is not None:
            raise BudgetExceeded(refusal)
        out = await self.inner.complete(messages, max_tokens, model=model)  # metered once: here
        try:
            async with self.meter.sf() as s, s.begin():
                await self.meter.record(s, call, out, messages)
        except Exception:  # the answer is worth more than its usage row
            log.exception("could not record the usage of a %s call", call.purpose)
        return out


@dataclass
class CallMetering:
    """The Meter as tools/chat.py's Metering: what the code tool's relay meters OpenCode's
    calls with (METERING, this feature's typed part)."""

    meter: Meter
    models: list[str]  # what /model may pick

    async def refusal(self, user_id: int | None) -> str | None:
        return await self.meter.refusal(user_id)

    async def chosen_model(self, user_id: int) -> str | None:
        picked = (await self.meter.user_usage(user_id)).llm_model
        return picked if picked in self.models else None

    async def record_call(
        self,
        call: ModelCall,
        out: Completion,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
    ) -> None:
        async with self.meter.sf() as s, s.begin():
            await self.meter.record(s, call, out, messages, tools)


# -- /context: the token split of each user's last request ----------------------------


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


METER: Key[Meter] = Key("usage.meter")
