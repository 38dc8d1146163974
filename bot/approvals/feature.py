"""Approvals: the gate before risky tool calls (built with the agent in bot/app.py, asked
through the adapter that runs), the audit of every decision, /approvals to list and revoke
the "always" grants, and the question's Allow once / Always / Deny buttons."""

from __future__ import annotations

from bot.approvals import commands
from bot.approvals.models import ApprovalDecision, ApprovalGrant
from bot.approvals.settings import ApprovalSettings
from tools.feature import Command, Feature

FEATURE = Feature(
    name="approvals",
    settings=ApprovalSettings,
    models=(ApprovalGrant, ApprovalDecision),
    commands=(
        Command(
            "approvals", "tools you allowed for good; /approvals revoke <tool>", commands.approvals
        ),
    ),
    press=commands.press,
)
