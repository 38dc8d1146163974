"""Usage: tokens and cost per model call (bot/usage/meter.py records them with each answer),
budgets, /usage with its chart, /model and /context (whose bookkeeping hook is
bot/usage/request.py). The Meter itself is built by bot/app.py with the agent, which
needs it before any adapter starts; the commands reach it with `host.part(Meter)`."""

from __future__ import annotations

from bot.usage import commands
from bot.usage.models import ModelUsage
from bot.usage.report import doctor_checks
from bot.usage.settings import UsageSettings
from tools.base import CheckResult
from tools.feature import Command, Feature, Host


async def check(host: Host) -> list[CheckResult]:
    meter = commands.meter_of(host)
    if meter is None:
        return []
    s = commands.settings(host)
    models = commands.allowed_models(s.llm_model, (*s.llm_models, s.llm_fallback_model or ""))
    return await doctor_checks(meter, models)


FEATURE = Feature(
    name="usage",
    settings=UsageSettings,
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
    doctor=check,
)
