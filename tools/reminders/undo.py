"""Undo for what the assistant created (issue 46 item 7): a reminder or task the model set
in a request is shown with an "Undo" button under the answer (tools/hooks.py ReplyButton),
where the adapter shows buttons; a press cancels it."""

from __future__ import annotations

from tools.base import RequestContext, ToolError
from tools.feature import CommandCall, Pressed, row_id
from tools.hooks import ReplyButton, TurnHooks
from tools.reminders import jobs
from tools.reminders.tool import CREATED

FEATURE = "reminders"
UNDO = "undo"


class UndoButtons(TurnHooks):
    """The same for every request that set a reminder: its buttons come from the request's
    own slot."""

    when = (CREATED,)

    def buttons(self, ctx: RequestContext) -> list[ReplyButton]:
        return [ReplyButton(FEATURE, f"↩ Undo #{i}", f"{UNDO}:{i}") for i in ctx.state(CREATED)]


async def undo(call: CommandCall, number: str) -> Pressed:
    job_id = row_id(number)
    if job_id is None:
        return Pressed("That button is out of date.", alert=True)
    deps = call.host.deps
    try:
        job = await jobs.change(deps.session_factory, user_id=call.who.user_id, job_id=job_id,
                                action="cancel", now=deps.clock())  # fmt: skip
    except ToolError:
        return Pressed(f"#{number} is already gone.", alert=True)
    return Pressed(f"↩ Undone: #{job.id} is cancelled.")
