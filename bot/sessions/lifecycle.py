"""Starting a new chat session: one path for /newsession, the terminal's /new and the model's
`new_session` tool. The old session is closed and the new one opened in one transaction
first, so a message arriving while the summary is written lands in the new one; then the old
one is archived (in the background for a command, so the reply does not wait for a slow
model). Without an archiver, or when the model fails, the split job archives it later."""

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
    # `chat`: a group's id; None: the user's own chat.
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
    """`new_session` runs only when the person's message (or the offer it answers) asks for
    a fresh start (tools/asked.py)."""

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
    """A request whose history found a summary due, or whose model asked for a fresh start.
    It holds nothing per request: each request gets this same object (tools/hooks.py Always)."""

    when = (DUE, ENDING)
    session_factory: SessionFactory
    clock: Clock
    archive: BackgroundArchive  # writes the ended session's summary (none: memory is off)
    compressions: Compressions | None = None  # where a summary found due is written

    async def on_answer(self, ctx: RequestContext, answer: str) -> None:
        """Summaries start in the background: no turn waits for them. Never raises: the reply
        goes out whatever happens here."""
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
