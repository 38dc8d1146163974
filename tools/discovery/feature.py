"""Tool discovery: which tools the model is shown on each call, within TOOL_TOKEN_BUDGET
(the rest through tool_search / tool_explain), learned from each user's use (its table);
/tools shows the split and its token cost.

The planner itself is installed by tools/registry.py, as it is built from the registry
it plans for; the feature reaches that registry through the Host."""

from __future__ import annotations

import asyncio

from tools.feature import Command, Feature, Host, Setup


def setup() -> Setup:
    from tools.base import CheckResult
    from tools.discovery import commands
    from tools.discovery.learning import Learning
    from tools.discovery.models import ToolUsage
    from tools.hooks import Always, RequestHooks
    from tools.tokens import count_payload, count_schema, tokenizer_name

    async def warm(host: Host) -> None:
        """Every request plans its tools from the catalog's token costs: count them now, in a
        thread (the tokenizer loads there if a schema is new to the process: an app built
        again in the same process, as tests do, loads it for nothing otherwise), then build
        the catalog from those counts on the loop, like a request would."""
        disc = host.registry.planner
        if disc is not None:
            schemas = disc.schemas()
            await asyncio.to_thread(lambda: [count_schema(s) for s in schemas])
            disc.catalog()

    def learning(host: Host) -> RequestHooks | None:
        disc = host.registry.planner
        return Always(Learning(disc)) if disc is not None else None

    async def check(host: Host) -> list[CheckResult]:
        """The tool counts, and the tokens the first call's tool list takes."""
        disc = host.registry.planner
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
        fix = "the core tools alone do not fit TOOL_TOKEN_BUDGET (tools/registry.py)"
        return [CheckResult("tools", first <= disc.budget, detail, fix)]

    return Setup(
        models=(ToolUsage,),
        commands=(Command("tools", "the tools I can use and their token cost", commands.tools),),
        turns=(learning,),
        warm=(warm,),
        doctor=check,
    )


FEATURE = Feature(name="discovery", setup=setup)
