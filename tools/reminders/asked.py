"""A reminder or task only when the person asked for one (issue 46 item 7), and cancelled
or paused only when they asked for that (item 6): the 1.5B model, asked to "suggest a quick
dinner I could make tonight", created a reminder nobody wanted, and it fired.

A `create` runs when the person's message (or the offer of Sidekick's it answers) speaks of
one; otherwise the model is told to ask first. With a small model (under SMALL_MODEL
parameters) even that create is put to the person, as the approval gate asks: such a model
reads "remind" into words that did not ask, and gets the time or text wrong."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from db.engine import SessionFactory
from tools.asked import asked
from tools.base import Tool, ToolCall
from tools.chat import SMALL_MODEL
from tools.effects import SEEN

# Words a message that asks for a reminder or task uses. "Reminders" named alone is not
# asking for one: "List my reminders." made the 1.5B model create a reminder, and the gate
# let it (bench/tool_use.py, 2026-12-06); a reminder is asked for with the verb, or set,
# added, made.
ASKING = re.compile(
    r"\bremind(?:s|ed|ing)?\b|\b(?:set|add|create|make|new|another|want|need|put)\b"
    r"[\w' ]{0,20}\breminders?\b|\bschedul|\balarm|\btimer\b|\bwake me\b|\bping me\b|\bnotify me\b"
    r"|\balert me\b|\bdon'?t let me forget\b|\bevery\s+(?:\d+|day|week|month|morning|evening"
    r"|night|hour|minute|monday|tuesday|wednesday|thursday|friday|saturday|sunday|weekday)"
    r"|\b(?:daily|weekly|hourly)\b|\bin\s+\d+\s*(?:min|minute|hour|h\b|day|week|sec)"
    r"|\bat\s+\d{1,2}(?::\d{2})?\s*(?:am|pm|h\b|o'?clock)?|\b\d{1,2}:\d{2}\b"
    r"|erinner|\brappel|recuérd|recordatorio|ricord|lembr|herinner|напомн",
    re.I,
)
# Words a message that asks to stop or hold a reminder or task uses (English-centred, as
# ASKING): held to one valid call, the 1.5B model cancelled the laundry reminder when the
# day's next message asked nothing of the kind (bench/tool_use.py --day, 2026-12-06).
STOPPING = re.compile(
    r"\bcancel|\bstop\b|\bpause|\bhold\b|\bdelete|\bremove|\bturn off|\bswitch off"
    r"|\bdisable|\bno longer|\bnot anymore|\bdon'?t (?:need|want)|\bskip|\bclear\b"
    r"|\bdon'?t remind|\bforget (?:it|about)|annul|stornier|lösch|abbrech|cancela|elimin"
    r"|annule|supprim|отмен|удали",
    re.I,
)
NOT_STOPPED = (
    "Not done: the user did not ask to cancel or pause a reminder or task in this message. "
    "Answer what they asked; to stop one, ask them first."
)
ASK_FIRST = (
    "Not created: the user did not ask for a reminder or task in this message. If one "
    "would help, ask them first (what, and when); create it only once they say so."
)


@dataclass(eq=False)
class AskedFirst:
    """The gate: None lets a create run, ASK_FIRST tells the model to ask first. It sees
    the reminders tool's calls only (tools/hooks.py Only, in tools/reminders/feature.py)."""

    sf: SessionFactory
    parameters: Callable[[], Awaitable[int | None]] | None = None  # the model's size, if known

    async def check(
        self, tool: Tool[Any], params: Any, args: dict[str, Any], call: ToolCall
    ) -> str | None:
        ctx = call.ctx
        if ctx.scheduled:
            return None
        if params.action in ("cancel", "pause"):
            return None if await asked(self.sf, ctx, STOPPING) else NOT_STOPPED
        if params.action != "create":
            return None
        if not await asked(self.sf, ctx, ASKING):
            return ASK_FIRST
        size = await self.parameters() if self.parameters is not None else None
        if size is not None and size < SMALL_MODEL:
            ctx.state(SEEN).unsure.add(call.call_id)  # the approval gate asks the person
        return None
