"""The usage reports: /usage, /usage session, `sidekick usage`, /context, doctor."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import fields
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from sqlalchemy.ext.asyncio import AsyncSession

from bot.usage import repo
from bot.usage.meter import ContextLog, Meter, period_starts, usd
from bot.usage.repo import Group
from db.repos import core as core_repo
from tools.base import CheckResult
from tools.model_call import PURPOSE_LABELS

REQUEST_PURPOSES = ("chat", "scheduled")


# /usage names the models that cost most; the rest are one line (a proxy's per-request aliases
# left thousands of names, and the reply ran to hundreds of messages).
TOP_MODELS = 8
FIGURES = [f.name for f in fields(Group)][2:]  # every figure, after model and purpose


def _sum(groups: list[Group]) -> Group:
    total = Group("", "", 0, 0, 0, 0, 0, 0, 0.0, 0)
    for g in groups:
        for name in FIGURES:
            setattr(total, name, getattr(total, name) + getattr(g, name))
    return total


def _minus(total: Group, part: Group) -> Group:
    rest = Group("", "", 0, 0, 0, 0, 0, 0, 0.0, 0)
    for name in FIGURES:
        setattr(rest, name, getattr(total, name) - getattr(part, name))
    rest.cost_usd = max(rest.cost_usd, 0.0)  # float sums in another order
    return rest


def figures(g: Group) -> str:
    """`3 calls · 1,234 tokens in (200 cached) · 56 out · $0.0004`"""
    parts = [f"{g.calls} call{'s' if g.calls != 1 else ''}"]
    cached = f" ({g.cached_tokens:,} cached)" if g.cached_tokens else ""
    parts.append(f"{g.prompt_tokens:,} tokens in{cached}")
    reasoning = f" ({g.reasoning_tokens:,} reasoning)" if g.reasoning_tokens else ""
    parts.append(f"{g.completion_tokens:,} out{reasoning}")
    if g.unpriced_calls == g.calls:
        parts.append("price unknown (tokens only)")
    elif g.unpriced_calls:
        plural = "s" if g.unpriced_calls != 1 else ""
        parts.append(f"{usd(g.cost_usd)} + {g.unpriced_calls} call{plural} at an unknown price")
    else:
        parts.append(usd(g.cost_usd))
    if g.estimated_calls:
        parts.append(f"{g.estimated_calls} estimated (no usage from the provider)")
    if g.written_calls:  # a small model's habit: how often it wrote its tool calls as text
        plural = "s" if g.written_calls != 1 else ""
        parts.append(f"{g.written_calls} tool call{plural} written as text")
    return " · ".join(parts)


def _by_purpose(title: str, groups: list[Group]) -> list[str]:
    by: dict[str, list[Group]] = defaultdict(list)
    for g in groups:
        by[PURPOSE_LABELS.get(g.purpose, g.purpose)].append(g)
    if not by:
        return []
    return [title, *(f"  {name} — {figures(_sum(gs))}" for name, gs in sorted(by.items()))]


async def _breakdowns(
    s: AsyncSession, scope: dict[str, Any], titles: tuple[str, str]
) -> tuple[Group, list[str]]:
    """The total, and its lines by model (the TOP_MODELS that cost most, the others as one
    line) and by purpose: two passes over the rows, the total being the purposes' sum."""
    purposes = await repo.groups(s, by="purpose", **scope)
    total = _sum(purposes)
    if not total.calls:
        return total, []
    top, models = await repo.top_groups(s, by="model", limit=TOP_MODELS, **scope)
    lines = [titles[0], *(f"  {g.model} — {figures(g)}" for g in top)]
    others = models - len(top)
    if others > 0:
        plural = "s" if others != 1 else ""
        lines.append(f"  {others:,} other model{plural} — {figures(_minus(total, _sum(top)))}")
    return total, lines + _by_purpose(titles[1], purposes)


async def _total(s: AsyncSession, **scope: Any) -> Group:
    found = await repo.groups(s, by="none", **scope)
    return found[0] if found else _sum([])


async def last_request_line(meter: Meter, user_id: int) -> str | None:
    """What the user's last request sent, by the provider's count (in /usage and /context)."""
    async with meter.sf() as s:
        rows = await repo.last_request(s, user_id, REQUEST_PURPOSES)
    if not rows:
        return None
    first = rows[0]
    how = "our estimate: the provider sent no usage" if first.estimated else "provider's count"
    at = first.at.astimezone(meter.tz)
    total = Group("", "", len(rows), 0, 0, 0, 0, 0, 0.0, 0)
    for r in rows:
        total.prompt_tokens += r.prompt_tokens
        total.completion_tokens += r.completion_tokens
        total.cached_tokens += r.cached_tokens
        total.estimated_calls += r.estimated
        if r.cost_usd is None:
            total.unpriced_calls += 1
        else:
            total.cost_usd += r.cost_usd
    total.estimated_calls = 0  # said once, above
    return (
        f"Last request ({at:%H:%M}, {first.model}): the first model call sent "
        f"{first.prompt_tokens:,} tokens ({how}); in all {figures(total)}"
    )


async def budget_lines(meter: Meter, user_id: int | None, *, amounts: bool) -> list[str]:
    """Budget state; `amounts=False` shows the shared budgets as percentages only."""
    spent = await meter.spent()
    out = []
    for limit in meter.limits(spent, user_id):
        pct = f"{100 * limit.share:.0f}%"
        if limit.key in ("day", "month"):
            period = "today" if limit.key == "day" else "this month"
            if amounts:
                out.append(f"Budget {period}: {usd(limit.used)} of {usd(limit.cap)} ({pct})")
            else:
                out.append(f"Shared budget {period}: {pct} used")
        else:
            period = "today" if limit.key == "user_day" else "this month"
            out.append(f"Your tokens {period}: {int(limit.used):,} of {int(limit.cap):,} ({pct})")
    return out


async def usage_text(meter: Meter, user_id: int | None, *, amounts: bool = False) -> str:
    """Today, this month, by model and by purpose; `user_id` None: everyone (the CLI)."""
    now = meter.clock()
    day, month = period_starts(now, meter.tz)
    async with meter.sf() as s:
        today = await _total(s, since=day, user_id=user_id)
        titles = ("By model (this month):", "By purpose (this month):")
        scope = {"since": month, "user_id": user_id}
        this_month, breakdowns = await _breakdowns(s, scope, titles)
    zone = meter.tz.key
    lines = [
        f"Today ({day:%Y-%m-%d}, {zone}): " + (figures(today) if today.calls else "nothing yet"),
        f"This month ({month:%B %Y}): "
        + (figures(this_month) if this_month.calls else "nothing yet"),
        *breakdowns,
    ]
    if user_id is not None:
        last = await last_request_line(meter, user_id)
        if last:
            lines.append(last)
    lines += await budget_lines(meter, user_id, amounts=amounts)
    return "\n".join(lines)


async def session_text(meter: Meter, user_id: int) -> str:
    async with meter.sf() as s:
        session = await core_repo.current_session(s, user_id)
        if session is None:
            return "No model calls in this session yet."
        scope: dict[str, Any] = {"user_id": user_id, "session_id": session.id}
        total, breakdowns = await _breakdowns(s, scope, ("By model:", "By purpose:"))
    if not total.calls:
        return "No model calls in this session yet."
    started: datetime = session.started_at.astimezone(meter.tz)
    head = f"This session ({session.name}, since {started:%Y-%m-%d %H:%M})"
    return "\n".join([f"{head}: {figures(total)}", *breakdowns])


async def doctor_checks(meter: Meter, models: list[str]) -> list[CheckResult]:
    """Today's spend and the budget state; models without a price when budgets are in USD."""
    now = meter.clock()
    day, _ = period_starts(now, meter.tz)
    async with meter.sf() as s:
        today = await _total(s, since=day)
    out = [CheckResult("usage today", True, figures(today) if today.calls else "no model calls")]
    spent = await meter.spent()
    limits = meter.limits(spent, None)
    if limits:
        over = [lim for lim in limits if lim.used >= lim.cap]
        state = "; ".join(
            f"{'today' if lim.key == 'day' else 'this month'} {usd(lim.used)} of "
            f"{usd(lim.cap)} ({100 * lim.share:.0f}%)"
            for lim in limits
        )
        state += " — used up: no model is called" if over else ""
        fix = "raise BUDGET_USD, or wait for the next period"
        out.append(CheckResult("budget", not over, state, fix))
    else:
        out.append(CheckResult("budget", True, "no USD budget set (BUDGET_USD)"))
    unpriced = [m for m in models if meter.prices.lookup(m) is None]
    if unpriced:
        usd_budget = bool(meter.day_usd or meter.month_usd)
        detail = f"price unknown for {', '.join(unpriced)}: counted in tokens only"
        detail += "; the USD budget cannot see their cost" if usd_budget else ""
        fix = "add them to PRICES (model=input/output[/cached] USD per 1M tokens)"
        out.append(CheckResult("prices", not usd_budget, detail, fix))
    return out


def context_text(log: ContextLog, user_id: int, tz: ZoneInfo) -> str:
    split = log.get(user_id)
    if split is None:
        return "No request of yours since the bot started; send a message, then /context."
    at: datetime = split.at.astimezone(tz)
    total = split.total or 1

    def row(label: str, n: int) -> str:
        return f"{label}: {n} tokens ({100 * n / total:.0f}%)"

    return "\n".join(
        [
            f"Your last request ({at:%Y-%m-%d %H:%M}), {split.total} tokens in all:",
            row("System prompt", split.system),
            row("Recalled memory", split.memory),
            row("History", split.history),
            row(f"Tools ({len(split.tool_names)})", split.tools),
        ]
    )
