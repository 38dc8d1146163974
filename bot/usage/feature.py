"""Usage: tokens and cost per model call (bot/usage/meter.py records them with each answer),
budgets, /usage with its chart, /model and /context (whose bookkeeping hook is in meter.py
too). The Meter is this feature's part (METER); the model wrapper meters plain completions,
the request hooks the chat's calls."""

from __future__ import annotations

from bot.usage.settings import UsageSettings
from tools.feature import Command, Feature, Host, Provide, Setup


def setup() -> Setup:
    from bot.usage import commands
    from bot.usage.meter import (
        CONTEXT_LOG,
        METER,
        CallMetering,
        ContextAccounting,
        ContextLog,
        Meter,
        MeteredModel,
        UsageTurns,
    )
    from bot.usage.models import ModelUsage
    from bot.usage.report import doctor_checks
    from tools.base import CheckResult
    from tools.chat import METERING, ChatModel, Metering
    from tools.hooks import Always, RequestHooks

    def offered(host: Host) -> list[str]:
        """The models a user may switch to (/model), each call is metered as."""
        s = commands.settings(host)
        return commands.allowed_models(s.llm_model, s.llm_models)

    async def meter(host: Host) -> Meter:
        deps = host.deps
        return Meter(deps.settings_for(UsageSettings), deps.session_factory, deps.clock, deps.tz)

    async def metering_part(host: Host) -> Metering:
        return CallMetering(await host.need(METER), offered(host))

    async def metered(host: Host, model: ChatModel) -> ChatModel:
        return MeteredModel(model, await host.need(METER))

    def metering(host: Host) -> RequestHooks:
        return UsageTurns(host.part(METER), offered(host))

    async def context_log(host: Host) -> ContextLog:
        return ContextLog()

    def accounting(host: Host) -> RequestHooks:
        return Always(ContextAccounting(host.part(CONTEXT_LOG)))

    async def check(host: Host) -> list[CheckResult]:
        meter = commands.meter_of(host)
        if meter is None:
            return []
        s = commands.settings(host)
        models = commands.allowed_models(s.llm_model, (*s.llm_models, s.llm_fallback_model or ""))
        return await doctor_checks(meter, models)

    return Setup(
        models=(ModelUsage,),
        commands=(
            Command("context", "token split of your last request", commands.context),
            Command(
                "usage",
                "tokens and cost: today, this month, by model",
                commands.usage,
                args="[session | footer on|off]",
            ),
            Command("model", "show or switch your model", commands.model, args="[name | default]"),
        ),
        parts=(
            Provide(METER, meter),
            Provide(METERING, metering_part),
            Provide(CONTEXT_LOG, context_log),
        ),
        wraps=(metered,),
        turns=(metering, accounting),
        doctor=check,
    )


FEATURE = Feature(name="usage", settings=UsageSettings, setup=setup)
