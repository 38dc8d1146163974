"""Approvals: the gate before risky tool calls (APPROVALS, a part; it asks through the
adapter that runs, which sets its asker), the audit of every decision, /approvals to list and revoke
the "always" grants, and the question's Allow once / Always / Deny buttons."""

from __future__ import annotations

from functools import partial

from bot.approvals.settings import ApprovalSettings
from tools.feature import Command, Feature, Host, Provide, Setup


def setup() -> Setup:
    from bot.approvals import commands
    from bot.approvals.gate import APPROVALS, TIMEOUT_S, Approvals
    from bot.approvals.models import ApprovalDecision, ApprovalGrant
    from bot.approvals.questions import close_for
    from tools.admission import ADMISSION
    from tools.hooks import Gate

    async def approvals(host: Host) -> Approvals:
        deps = host.deps
        mode = deps.settings_for(ApprovalSettings).approvals
        gate = Approvals(mode, TIMEOUT_S, deps.session_factory, deps.clock, deps.scrub)
        if host.has(ADMISSION):  # a person or group the owner removes has no question left open
            admission = await host.need(ADMISSION)
            admission.on_removal(partial(close_for, gate))
        return gate

    def gate(host: Host) -> Gate:
        return host.part(APPROVALS)

    return Setup(
        models=(ApprovalGrant, ApprovalDecision),
        commands=(
            Command(
                "approvals",
                "tools you allowed for good",
                commands.approvals,
                args="[revoke <tool>]",
            ),
        ),
        press=commands.press,
        parts=(Provide(APPROVALS, approvals),),
        gates=(gate,),
    )


FEATURE = Feature(name="approvals", settings=ApprovalSettings, setup=setup)
