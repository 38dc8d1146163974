"""The approval gate: before a tool call the policy calls risky (APPROVALS), the user whose
message started it is shown the exact action and answers Allow once / Always for this tool /
Deny, in whichever adapter asks (the `asker`: Telegram buttons, the terminal's y/n). No
answer within TIMEOUT_S is a no. The model gets the outcome as the tool's result;
every decision goes to the audit (bot/approvals/repo.py)."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from bot.approvals import repo
from db.engine import SessionFactory
from tools.base import Clock, Tool, ToolCall
from tools.effects import Effects

log = logging.getLogger(__name__)

Choice = Literal["once", "always", "deny"]
# Seconds a question waits for the user; no answer is a no. Two minutes: time to read the
# action, short enough that the request (and the chat's queue behind it) does not hang.
TIMEOUT_S = 120.0
ACTION_LIMIT = 3000  # characters of the action shown: a Telegram message holds 4096
# What is risky whatever else the call does: it reaches out of Sidekick's own data.
OUTWARD = frozenset({"internet", "files", "messages"})
DENIED = "Not run: the user denied this action. Do not try it another way; ask them instead."
TIMED_OUT = "Not run: the user did not answer the approval request within {:g} s (a no)."
NOBODY = "Not run: this action needs the user's approval, and there is no one to ask here."
DECISIONS: dict[Choice | None, str] = {
    "once": "once", "always": "always", "deny": "denied", None: "timeout",
}  # fmt: skip


@dataclass(frozen=True)
class Question:
    key: int  # its row in the audit (bot/approvals/repo.py): a press anywhere settles it
    telegram_user_id: int | None  # who may answer (None: the terminal's local user)
    chat_id: int | None  # where to ask: the chat the message came from
    user_name: str
    tool: str
    action: str  # the exact action, secrets masked
    effects: str  # "writes execution, internet"
    timeout_s: float


class Asker(Protocol):
    """Puts the question to the user and returns their choice; cancelled at the timeout."""

    async def __call__(self, q: Question) -> Choice: ...


def needs_approval(mode: str, fx: Effects, *, scheduled: bool, deletions: int) -> bool:
    """APPROVALS=all: every call that writes; risky: code with network access and MCP tools
    that write (OUTWARD), code a scheduled task runs (nobody watches), and deleting a second
    thing in one message."""
    if mode == "off" or not fx.writes:
        return False
    if mode == "all" or fx.writes & OUTWARD:
        return True
    return ("execution" in fx.writes and scheduled) or (fx.deletes and deletions > 0)


def action_text(tool: str, args: dict[str, Any]) -> str:
    lines = [tool]
    for key, value in args.items():
        if value is not None:
            shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            lines.append(f"{key}: {shown}")
    text = "\n".join(lines)
    if len(text) > ACTION_LIMIT:
        text = text[:ACTION_LIMIT] + f"\n… ({len(text) - ACTION_LIMIT} more characters)"
    return text


@dataclass
class Approvals:
    mode: str
    timeout_s: float
    sf: SessionFactory
    clock: Clock
    scrub: Callable[[str], str]  # masks the settings' secrets
    asker: Asker | None = None  # set by the adapter that runs (Telegram, the terminal)

    async def check(
        self, tool: Tool[Any], params: Any, args: dict[str, Any], call: ToolCall
    ) -> str | None:
        """None: run the call; else the sentence the model gets instead of its result."""
        ctx, fx = call.ctx, tool.effects_of(params)
        risky = needs_approval(self.mode, fx, scheduled=ctx.scheduled, deletions=ctx.deletions)
        if risky and not await repo.granted(self.sf, ctx.user_id, tool.name):
            if self.asker is None:
                return NOBODY
            action, now = self.scrub(action_text(tool.name, args)), self.clock()
            key = await repo.ask(self.sf, ctx.user_id, ctx.telegram_user_id, tool.name, action, now)
            q = Question(key, ctx.telegram_user_id, ctx.chat_id, ctx.user_name, tool.name, action,
                         fx.text(), self.timeout_s)  # fmt: skip
            choice: Choice | None = None
            try:
                async with asyncio.timeout(self.timeout_s):
                    choice = await self.asker(q)
            except TimeoutError:
                pass
            except asyncio.CancelledError:  # the request ended (shutdown): so does the question
                await asyncio.shield(repo.settle(self.sf, key, DECISIONS[None], self.clock()))
                raise
            except Exception:  # could not ask (Telegram refused the message): not run
                log.exception("asking for approval of %s failed", tool.name)
                choice = "deny"
            # The first answer stands: a press just before the timeout wins over it.
            stands = await repo.settle(self.sf, key, DECISIONS[choice], self.clock())
            if stands not in ("once", "always"):
                return DENIED if stands == "denied" else TIMED_OUT.format(self.timeout_s)
        ctx.deletions += fx.deletes
        return None
