"""Metering one agent request: the user's model, the budget check before each model call,
the usage row with each stored answer, and the lines added under the answer."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from bot.llm.client import Completion
from bot.usage.meter import Meter, Totals, parse_warned
from db.models.core import User
from db.repos import usage as repo
from tools.base import RequestContext
from tools.model_call import ModelCall, Purpose

KEY = "usage"  # ctx.state key


@dataclass
class RequestUsage:
    call: ModelCall
    model: str | None  # the user's pick; None: LLM_MODEL
    footer: bool
    warned: dict[str, str]
    totals: Totals = field(default_factory=Totals)
    notes: list[str] = field(default_factory=list)  # fallback notices, budget warnings


def allowed_models(default: str, configured: tuple[str, ...]) -> list[str]:
    """What /model offers: LLM_MODEL first, then LLM_MODELS."""
    return list(dict.fromkeys([m for m in (default, *configured) if m]))


def begin(ctx: RequestContext, user: User, purpose: Purpose, models: list[str]) -> RequestUsage:
    """Called with the user's row at the start of a request (no extra query)."""
    chosen = user.llm_model if user.llm_model in models else None
    ru = RequestUsage(
        call=ModelCall(purpose, ctx.user_id, ctx.session_id, ctx.request_id),
        model=chosen,
        footer=bool(user.usage_footer),
        warned=parse_warned(user.usage_warned),
    )
    ctx.state[KEY] = ru
    return ru


def of(ctx: RequestContext) -> RequestUsage | None:
    ru = ctx.state.get(KEY)
    return ru if isinstance(ru, RequestUsage) else None


async def after_call(
    meter: Meter,
    s: AsyncSession,
    ctx: RequestContext,
    out: Completion,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
) -> None:
    """Inside the transaction that stores the call's answer: its usage row, and a budget
    warning (once per period) stored on the user."""
    ru = of(ctx)
    if ru is None:
        return
    usage, cost = await meter.record(s, ru.call, out, messages, tools)
    ru.totals.add(usage, cost)
    if out.fallback_from:
        why = f" ({out.fallback_reason})" if out.fallback_reason else ""
        note = f"{out.fallback_from} is not answering{why}; this answer is from {out.model}."
        if note not in ru.notes:
            ru.notes.append(note)
    warnings = meter.warnings(ctx.user_id, ru.warned)
    if warnings:
        ru.notes.extend(warnings)
        await repo.set_warned(s, ctx.user_id, json.dumps(ru.warned))


def extra_lines(ctx: RequestContext) -> str:
    """Text to append to the answer the user sees (never stored in the history)."""
    ru = of(ctx)
    if ru is None:
        return ""
    lines = [f"ℹ️ {n}" for n in ru.notes]
    if ru.footer and ru.totals.calls:
        lines.append(f"📊 {ru.totals.footer()}")
    return "\n\n" + "\n".join(lines) if lines else ""
