"""doctor: the tool counts, and the tokens the first call's tool list takes."""

from __future__ import annotations

from tools.base import CheckResult
from tools.discovery.service import Discovery
from tools.tokens import count_payload, tokenizer_name


def budget_check(disc: Discovery) -> CheckResult:
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
    return CheckResult("tools", first <= disc.budget, detail, fix)
