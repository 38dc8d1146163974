"""Tool discovery: which tools the model is shown on each call, within TOOL_TOKEN_BUDGET
(the rest through tool_search / tool_explain), learned from each user's use (its table);
/tools shows the split and its token cost.

The planner itself is installed by tools/registry.py, as it is built from the registry
it plans for; the feature reaches that registry through the Host."""

from __future__ import annotations

import asyncio

from tools.base import CheckResult
from tools.discovery import commands
from tools.discovery.doctor import budget_check
from tools.discovery.models import ToolUsage
from tools.discovery.repo import Learning
from tools.feature import Command, Feature, Host
from tools.hooks import Always, RequestHooks
from tools.registry import discovery
from tools.tokens import encoder


async def warm(host: Host) -> None:
    """Every request plans its tools from the catalog's token costs: count them now (the
    tokenizer loaded in a thread, the count on the loop, like a request would)."""
    disc = discovery(host.registry)
    if disc is not None:
        await asyncio.to_thread(encoder)
        disc.catalog()


def learning(host: Host) -> RequestHooks | None:
    disc = discovery(host.registry)
    return Always(Learning(disc.usage)) if disc is not None else None


async def check(host: Host) -> list[CheckResult]:
    disc = discovery(host.registry)
    return [] if disc is None else [budget_check(disc)]


FEATURE = Feature(
    name="discovery",
    models=(ToolUsage,),
    commands=(Command("tools", "the tools I can use and their token cost", commands.tools),),
    turns=(learning,),
    warm=(warm,),
    doctor=check,
)
