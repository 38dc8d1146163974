"""The approval gate: before a call the policy calls risky (APPROVALS), the person whose
message started it sees the whole action and answers once / always / deny; no answer within
TIMEOUT_S is a no, and every decision is audited. Once the turn has seen outside content (the
SEEN slot: tools/effects.py), every call that writes asks, as that content may steer the
model, but sandboxed code without the network, which can neither send what it read nor reach
anyone. An "always" from a chat does not cover a scheduled task's run, which nobody watches."""

from __future__ import annotations

import asyncio
import json
import logging
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from bot.approvals import repo
from db.engine import SessionFactory
from tools.base import Clock, Tool, ToolCall
from tools.effects import SEEN, Effects
from tools.state import Key, Slot

log = logging.getLogger(__name__)

Choice = Literal["once", "always", "deny"]
# Seconds a question waits for the user; no answer is a no. Two minutes: time to read the
# action, short enough that the request (and the chat's queue behind it) does not hang.
TIMEOUT_S = 120.0
# What is risky whatever the turn saw: acting outside Sidekick's own data with no sandbox
# around it (an MCP tool that writes files, sends mail, posts). Sandboxed code reaches only
# public addresses through the egress proxy, and asks in a turn that saw outside content.
OUTWARD = frozenset({"internet", "files", "messages"})
LOCAL_CODE = frozenset({"execution"})  # sandboxed code with no network
DENIED = "Not run: the user denied this action. Do not try it another way; ask them instead."
TIMED_OUT = "Not run: the user did not answer the approval request within {:g} s (a no)."
REMOVED = (
    "Not run: the owner removed this person before they answered; nothing more may be "
    "done for them."
)
NOBODY = "Not run: this action needs the user's approval, and there is no one to ask here."
UNASKED = "Not run: the approval request could not be shown to the user ({}). It was not denied."
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
    action: str  # the whole action, secrets masked, invisible characters shown escaped
    effects: str  # "writes execution, internet"
    timeout_s: float
    scheduled: bool = False  # a scheduled task's run: "always" then covers those runs too
    why: str = ""  # what outside content the turn saw before this call, if any
    needs: str = ""  # what the call would do, named after outside content ("reach the network")


class Asker(Protocol):
    """The user's choice; TimeoutError when they did not answer within `q.timeout_s` of seeing
    it (a question still on its way, as Telegram is down, waits: it is not a no)."""

    async def __call__(self, q: Question) -> Choice: ...


def needs_approval(
    mode: str, fx: Effects, *, scheduled: bool, deletions: int, outside: bool = False
) -> bool:
    """APPROVALS=risky: after outside content every write but sandboxed code without the
    network (nothing it read can leave); else code a scheduled task runs (nobody watches),
    MCP tools that write (OUTWARD) and a second deletion in one message."""
    if mode == "off" or not fx.writes:
        return False
    if mode == "all":
        return True
    if fx.writes == LOCAL_CODE:
        return scheduled
    if outside:
        return True
    if "execution" in fx.writes:  # sandboxed code the user's own words asked for
        return scheduled
    return bool(fx.writes & OUTWARD) or (fx.deletes and deletions > 0)


# What a writing call needs, as the question names it: after outside content the person
# decides on this, not on the code (code without the network would not have asked).
NEEDS: dict[str, str] = {
    "internet": "reach the network",
    "messages": "send messages",
    "memory": "change what you keep",
    "files": "change files",
    "execution": "run code",
}


def needs(fx: Effects) -> str:
    return " and ".join(NEEDS[k] for k in NEEDS if k in fx.writes)


def visible(text: str) -> str:
    """What does not show (bidi controls, zero-width and control characters but newline and
    tab) escaped as \\u202e: an action cannot look other than it is."""
    return "".join(
        f"\\u{ord(ch):04x}"
        if (cat := unicodedata.category(ch)) in ("Cf", "Cs", "Co", "Zl", "Zp")
        or (cat == "Cc" and ch not in "\n\t")
        else ch
        for ch in text
    )


def action_text(tool: str, args: dict[str, Any]) -> str:
    # Every argument, nothing cut: the adapter sends a long one as a file.
    lines = [tool]
    for key, value in args.items():
        if value is not None:
            shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            lines.append(f"{key}: {shown}")
    return visible("\n".join(lines))


@dataclass
class Deletions:
    count: int = 0


DELETIONS = Slot("approvals.deletions", Deletions)


@dataclass
class Approvals:
    mode: str
    timeout_s: float
    sf: SessionFactory
    clock: Clock
    scrub: Callable[[str], str]  # masks the settings' secrets
    asker: Asker | None = None  # set by the adapter that runs (Telegram, the terminal)
    # The questions waiting in this process, by the chat they were asked in: a group the
    # owner removes has its questions closed (bot/approvals/questions.py close_for).
    waiting: dict[int, int | None] = field(default_factory=dict)

    async def check(
        self, tool: Tool[Any], params: Any, args: dict[str, Any], call: ToolCall
    ) -> str | None:
        ctx, fx = call.ctx, tool.effects_of(params)
        seen, deleted = ctx.state(SEEN), ctx.state(DELETIONS)
        risky = needs_approval(self.mode, fx, scheduled=ctx.scheduled, deletions=deleted.count,
                               outside=bool(seen.sources))  # fmt: skip
        # A call the model copied from someone's text asks, an "always" grant or not: the
        # grant was given for what the person asked, not for what an e-mail wrote. So does
        # one a feature is unsure the person wanted (a small model's reminder).
        marked = call.call_id in seen.copies or call.call_id in seen.unsure
        copied = self.mode != "off" and bool(fx.writes) and marked
        if copied or (
            risky and not await repo.granted(self.sf, ctx.user_id, tool.name, ctx.scheduled)
        ):
            if self.asker is None:
                return NOBODY
            action, now = self.scrub(action_text(tool.name, args)), self.clock()
            key = await repo.ask(self.sf, ctx.user_id, ctx.telegram_user_id, tool.name, action, now,
                                 scheduled=ctx.scheduled)  # fmt: skip
            why = ", ".join(seen.sources)
            q = Question(key, ctx.telegram_user_id, ctx.chat_id, ctx.user_name, tool.name, action,
                         fx.text(), self.timeout_s, ctx.scheduled, why, needs(fx))  # fmt: skip
            choice: Choice | None = None
            self.waiting[key] = ctx.chat_id
            try:
                choice = await self.asker(q)
            except TimeoutError:
                pass
            except asyncio.CancelledError:  # the request ended (shutdown): so does the question
                await asyncio.shield(repo.settle(self.sf, key, DECISIONS[None], self.clock()))
                raise
            except Exception as exc:  # Telegram refused the question for good: not asked
                log.warning("asking for approval of %s failed: %s", tool.name, exc)
                await repo.settle(self.sf, key, "undelivered", self.clock())
                return UNASKED.format(exc)
            finally:
                self.waiting.pop(key, None)
            # The first answer stands: a press just before the timeout wins over it.
            stands = await repo.settle(self.sf, key, DECISIONS[choice], self.clock())
            if stands not in ("once", "always"):
                said = {"denied": DENIED, repo.CLOSED: REMOVED}
                return said.get(stands) or TIMED_OUT.format(self.timeout_s)
            seen.confirmed.add(call.call_id)  # the user saw this very call and said yes
        deleted.count += fx.deletes
        return None


APPROVALS: Key[Approvals] = Key("approvals.gate")
