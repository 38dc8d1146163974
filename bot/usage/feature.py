"""Usage: tokens and cost per model call (bot/usage/meter.py records them with each answer),
budgets, /usage with its chart, /model and /context (whose bookkeeping hook is
bot/usage/request.py). The Meter is this feature's part (METER); the model wrapper meters
plain completions, the request hooks the chat's calls."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot.usage.settings import UsageSettings
from tools.feature import Command, Feature, Host, Provide, Setup

if TYPE_CHECKING:
    from bot.usage.meter import Meter
    from tools.base import CheckResult
    from tools.chat import ChatModel, Metering
    from tools.hooks import RequestHooks


async def meter(host: Host) -> Meter:
    from bot.usage.meter import Meter

    deps = host.deps
    return Meter(deps.settings_for(UsageSettings), deps.session_factory, deps.clock, deps.tz)


async def metering_part(host: Host) -> Metering:
    from bot.usage import commands
    from bot.usage.meter import METER, CallMetering

    s = commands.settings(host)
    return CallMetering(await host.need(METER), commands.allowed_models(s.llm_model, s.llm_models))


async def metered(host: Host, model: ChatModel) -> ChatModel:
    from bot.usage.meter import METER, MeteredModel

    return MeteredModel(model, await host.need(METER))


def metering(host: Host) -> RequestHooks:
    from bot.usage import commands
    from bot.usage.meter import METER
    from bot.usage.request import UsageTurns

    s = commands.settings(host)
    models = commands.allowed_models(s.llm_model, s.llm_models)
    return UsageTurns(host.part(METER), models)


def accounting(host: Host) -> RequestHooks | None:
    from bot.usage.request import ContextAccounting
    from tools.hooks import Always
    from tools.registry import discovery

    disc = discovery(host.registry)
    return Always(ContextAccounting(disc.context_log)) if disc is not None else None


async def check(host: Host) -> list[CheckResult]:
    from bot.usage import commands
    from bot.usage.report import doctor_checks

    meter = commands.meter_of(host)
    if meter is None:
        return []
    s = commands.settings(host)
    models = commands.allowed_models(s.llm_model, (*s.llm_models, s.llm_fallback_model or ""))
    return await doctor_checks(meter, models)


def setup() -> Setup:
    from bot.usage import commands
    from bot.usage.meter import METER
    from bot.usage.models import ModelUsage
    from tools.chat import METERING

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
        parts=(Provide(METER, meter), Provide(METERING, metering_part)),
        wraps=(metered,),
        turns=(metering, accounting),
        doctor=check,
    )


FEATURE = Feature(name="usage", settings=UsageSettings, setup=setup)
