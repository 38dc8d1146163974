"""Tool discovery: which tools the model is shown on each call, within TOOL_TOKEN_BUDGET
(the rest through tool_search / tool_explain), learned from each user's use (its table);
/tools shows the split and its token cost.

The planner itself is installed by tools/registry.py, as it is built from the registry
it plans for; the feature reaches that registry through the Host."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from db.conversation import RecordWrite
from tools.base import CheckResult, RequestContext
from tools.discovery import commands
from tools.discovery.models import ToolUsage
from tools.discovery.repo import ADD_USE, USED
from tools.discovery.service import Discovery
from tools.feature import Command, Feature, Host
from tools.hooks import Always, RequestHooks, TurnHooks
from tools.registry import discovery
from tools.tokens import count_payload, encoder, tokenizer_name


async def warm(host: Host) -> None:
    """Every request plans its tools from the catalog's token costs: count them now (the
    tokenizer loaded in a thread, the count on the loop, like a request would)."""
    disc = discovery(host.registry)
    if disc is not None:
        await asyncio.to_thread(encoder)
        disc.catalog()


@dataclass
class Learning(TurnHooks):
    """The discovery feature's part of a request whose tools ran: what its calls used goes
    in with the tool round's record."""

    when = (USED,)
    disc: Discovery

    def record_writes(self, ctx: RequestContext) -> list[RecordWrite]:
        used = ctx.state(USED)
        if not used:
            return []
        rows = self.disc.learned(ctx.user_id, used)
        used.clear()
        return [RecordWrite(ADD_USE, rows)]


def learning(host: Host) -> RequestHooks | None:
    disc = discovery(host.registry)
    return Always(Learning(disc)) if disc is not None else None


async def check(host: Host) -> list[CheckResult]:
    """The tool counts, and the tokens the first call's tool list takes."""
    disc = discovery(host.registry)
    if disc is None:
        return []
    cat = disc.catalog()
    plan = disc.plan(-1, cat)
    shown = list(cat.core) + plan.direct
    first = count_payload([(cat.core.get(n) or cat.extensions[n]).schema() for n in shown])
    first += cat.meta_cost if plan.meta else 0
    detail = (
        f"{len(cat.core)} core + {len(cat.extensions)} extension tools; "
        f"first call ~{first} of {disc.budget} tokens ({tokenizer_name()})"
        + (", the rest via tool_search" if plan.meta else "")
    )
    fix = "the core tools alone do not fit TOOL_TOKEN_BUDGET (tools/discovery/service.py)"
    return [CheckResult("tools", first <= disc.budget, detail, fix)]


FEATURE = Feature(
    name="discovery",
    models=(ToolUsage,),
    commands=(Command("tools", "the tools I can use and their token cost", commands.tools),),
    turns=(learning,),
    warm=(warm,),
    doctor=check,
)
