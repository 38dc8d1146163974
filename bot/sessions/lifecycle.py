"""Starting a new chat session: the one path for /newsession, the terminal's /new and the
model's own request (the `new_session` tool: SessionTurns, the sessions' part of every
agent request, closes the session after the answer). The scheduled split archives through the
same Archiver and lets the next message open the new session; a message that arrives
after the split time but before the scheduler got to it (the bot was down, or the job
runs a minute later) closes the old session itself (db/conversation.py), so it never lands
in a finished period.

The old session is closed and the new one opened in one transaction first, so a message
arriving while the summary is being written already lands in the new session; then the
old one is archived: by the caller's archiver, or (/newsession) in the background by the
sessions part, so the reply does not wait for a slow model. One writer at a time holds a
session's summary (a lease on its archive row), so /newsession, the split job and another
worker never summarise one session at once. Without an archiver at hand (or when the
model fails) the closed session waits as "summary pending" and the scheduler's next run
archives it.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from bot.sessions import repo as sessions_repo
from bot.sessions.archive import Archiver, ArchiveResult
from bot.sessions.background import BackgroundArchive
from bot.sessions.history import DUE, Compressions
from db.engine import SessionFactory
from db.repos import core as repo
from tools.asked import asked
from tools.base import Clock, RequestContext, Tool, ToolCall, ToolDeps, ToolModule
from tools.hooks import TurnHooks
from tools.state import Slot

log = logging.getLogger(__name__)


@dataclass
class NewSession:
    session_id: int
    name: str
    ended_session_id: int | None
    # What became of the ended session's summary (None: no session ended, or deferred).
    archive: ArchiveResult | None = None
    in_background: bool = False  # the summary is being written in the background


async def start_new_session(
    session_factory: SessionFactory,
    clock: Clock,
    *,
    telegram_user_id: int | None,
    user_name: str = "",
    name: str | None = None,
    archiver: Archiver | None = None,
    chat: int | None = None,
) -> NewSession:
    """Close the user's open session in `chat` (a group's id; None: their own chat), if
    any, open a new one there, then archive the old one."""
    now = clock()
    async with session_factory() as s, s.begin():
        user = await repo.get_or_create_user(s, telegram_user_id, user_name, now)
        current = await repo.current_session(s, user.id, chat)
        if current is not None:
            await sessions_repo.close_session(s, current.id, now)
        created = await repo.create_session(s, user.id, name, now, chat)
        out = NewSession(created.id, created.name, current.id if current else None)
    if out.ended_session_id is not None and archiver is not None:
        out.archive = await archiver.archive(out.ended_session_id)
    elif out.ended_session_id is not None:
        log.info("session %d closed; its summary is left to the scheduler", out.ended_session_id)
    return out


@dataclass
class Ending:
    """Set by the new_session tool: the session ends after this request's answer."""

    asked: bool = False


ENDING = Slot("sessions.ending", Ending)


class NewSessionParams(BaseModel):
    pass


async def _end(params: NewSessionParams, call: ToolCall) -> str:
    call.ctx.state(ENDING).asked = True
    return "A new session will start after this reply."


def new_session_tool(deps: ToolDeps) -> Tool[NewSessionParams]:
    return Tool(
        name="new_session",
        description="End this conversation after your reply: the user's next message starts "
        "a fresh session (this one is summarised into memory). Only when the user asks.",
        params=NewSessionParams,
        run=_end,
    )


# Words a message that asks for a fresh start uses (English-centred, as the reminders'
# gate). Held to one valid call, the 1.5B model chose `new_session` (no arguments: the
# cheapest call to write) after storing a memory, twice in the recorded day, unasked.
ASKING = re.compile(
    r"\bnew (?:session|conversation|chat|topic)|\bfresh (?:start|session|conversation|chat)"
    r"|\bstart (?:over|again|afresh|fresh)|\breset\b|\bnewsession|\bclear (?:the |our |this )?"
    r"(?:chat|conversation|history|context)|\bforget (?:this|our) (?:conversation|chat)"
    r"|neue[nrs]? (?:sitzung|unterhaltung|chat)|nouvelle (?:session|conversation)"
    r"|nueva (?:sesión|conversación)|nova (?:sessão|conversa)|нов(?:ый|ую) (?:чат|разговор|сесси)",
    re.I,
)
NOT_ASKED = (
    "Not done: the user did not ask to start a new session in this message. Answer what they asked."
)


class AskedToEnd:
    """The sessions' gate: `new_session` runs only when the person's message (or the offer
    it answers) asks for a fresh start (tools/asked.py). It sees that tool's calls only
    (tools/hooks.py Only, in bot/sessions/feature.py)."""

    def __init__(self, session_factory: SessionFactory) -> None:
        self.sf = session_factory

    async def check(
        self, tool: Tool[Any], params: Any, args: dict[str, Any], call: ToolCall
    ) -> str | None:
        return None if await asked(self.sf, call.ctx, ASKING) else NOT_ASKED


TOOL = ToolModule(
    name="new_session",
    build=new_session_tool,
    prompt="new_session: start a fresh conversation when the user asks for one.",
    extension=True,
)


@dataclass
class SessionTurns(TurnHooks):
    """The sessions' part of an agent request whose history found a summary due, or whose
    model asked for a fresh start (then the session is closed after its answer). It holds
    nothing per request, so each request gets this same object (tools/hooks.py Always)."""

    when = (DUE, ENDING)
    session_factory: SessionFactory
    clock: Clock
    archive: BackgroundArchive  # writes the ended session's summary (none: memory is off)
    compressions: Compressions | None = None  # where a summary found due is written

    async def on_answer(self, ctx: RequestContext, answer: str) -> None:
        """Start the summary of the session's oldest turns its history found due, in the
        background: the answer is stored, and no turn waits for it. Then, when the model
        asked for a fresh start, close the session now (the next message opens a new one)
        and write its summary in the background, as /newsession does. Never raises: the
        reply goes out whatever happens here."""
        if self.compressions is not None:  # a request whose history found none due: no llm
            self.compressions.soon(ctx.state(DUE))
        if not ctx.state(ENDING).asked:
            return
        try:
            started = await start_new_session(
                self.session_factory,
                self.clock,
                telegram_user_id=ctx.telegram_user_id,
                user_name=ctx.user_name,
                chat=ctx.chat,
            )
        except Exception:
            log.exception("starting the new session the model asked for failed")
            return
        if started.ended_session_id is not None:
            self.archive.archive_soon(started.ended_session_id)
