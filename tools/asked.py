"""Whether the person asked for what a call would do: their message says so, or it answers
Sidekick's last answer, which offered it (the person read the offer and said yes). A small
model reads a reminder or a deletion into words that asked for neither (issue 46): the
features that write what the person keeps check their words here before a call runs."""

from __future__ import annotations

import re

from db.engine import SessionFactory
from db.repos import core as core_repo
from tools.base import RequestContext

# Rows read back from the session to find the person's message and the answer before it.
RECENT = 60


async def asked(sf: SessionFactory, ctx: RequestContext, words: re.Pattern[str]) -> bool:
    """True when the message or the offer before it holds `words`; True too where there is
    nothing to judge by (a scheduled task's prompt is the person's own order; a message not
    among the session's newest rows)."""
    if ctx.scheduled or ctx.trigger_message_id is None:
        return True
    async with sf() as s:
        rows = await core_repo.session_messages(s, ctx.session_id, limit=RECENT)
    at = next((i for i, m in enumerate(rows) if m.id == ctx.trigger_message_id), None)
    if at is None:
        return True
    offered = next(
        (m.content for m in reversed(rows[:at]) if m.role == "assistant" and m.content), ""
    )
    return bool(words.search(rows[at].content) or words.search(offered))
