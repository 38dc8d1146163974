"""APPROVALS: which tool calls wait for the user's yes."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel


class ApprovalSettings(BaseModel):
    # Which tool calls wait for the user's yes (bot/approvals/gate.py): none, the risky ones
    # (code with network, MCP tools that write, code in scheduled tasks, a second forget in
    # one message), or every call that changes something. Unanswered after the timeout: no.
    approvals: Literal["off", "risky", "all"] = "risky"
