"""The `schedule` tool: reminders (a stored text sent at the time) and tasks (a prompt the
assistant runs at the time, with its tools, sending the answer)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, Field

from tools.base import Capabilities, Tool, ToolCall, ToolError
from tools.schedule import jobs
from tools.schedule.parse import Fields, build_spec
from tools.schedule.times import describe, local_text

if TYPE_CHECKING:
    from tools.registry import ToolDeps

DESCRIPTION = """Reminders and scheduled tasks for the user, in the user's time zone.
- create: kind=reminder sends `text` at the time; kind=task runs `text` as an instruction
  for you (with your tools) at the time and sends your answer (e.g. "weather in Berlin and
  my plan for today"). Always pass `when` = the user's own words for the time, AND the
  structured fields as local wall-clock time: `at` ("YYYY-MM-DD HH:MM", "HH:MM",
  "tomorrow 09:00"), or `in_minutes`, or `every` ("30m", "2h"; `at` = first run), or
  `daily_at` ("08:00") with `days` ("weekdays", "weekends", "mon,wed,fri"; default daily).
  Never convert to UTC: the server does. If it says the time has passed or is unclear,
  ask the user or follow its suggestion.
- list: the user's reminders and tasks with ids and next run.
- cancel / pause / resume: by `job_id`."""


class ScheduleParams(BaseModel):
    action: Literal["create", "list", "cancel", "pause", "resume"]
    kind: Literal["reminder", "task"] = Field("reminder", description="create: what it is")
    text: str | None = Field(
        None, description="create: the reminder text, or the task's instruction"
    )
    when: str | None = Field(None, description="create: the user's words for the time, verbatim")
    at: str | None = Field(None, description="local time: YYYY-MM-DD HH:MM, HH:MM, tomorrow HH:MM")
    in_minutes: int | None = Field(None, description="one-shot this many minutes from now")
    every: str | None = Field(None, description="interval: 30m, 2h, 90 minutes")
    daily_at: str | None = Field(None, description="recurring local time HH:MM")
    days: str | None = Field(None, description="with daily_at: weekdays|weekends|mon,wed,fri")
    job_id: int | None = Field(None, description="cancel/pause/resume: the id from list")


def build(deps: ToolDeps) -> Tool[ScheduleParams]:
    sf = deps.session_factory

    async def run(p: ScheduleParams, call: ToolCall) -> str:
        ctx = call.ctx
        now = ctx.now()
        if p.action == "create":
            fields = Fields(p.at, p.in_minutes, p.every, p.daily_at, p.days)
            spec = build_spec(fields, p.when or "", now, ctx.timezone)
            job = await jobs.create(
                sf,
                user_id=ctx.user_id,
                kind=p.kind,
                text=p.text or "",
                words=p.when or "",
                spec=spec,
                now=now,
            )
            assert job.next_run_at is not None
            nxt = local_text(job.next_run_at, ctx.timezone)
            return (
                f"Scheduled {job.kind} #{job.id}: {describe(spec)} ({ctx.timezone.key}); "
                f"next run {nxt}."
            )
        if p.action == "list":
            found = await jobs.listing(sf, ctx.user_id)
            if not found:
                return "No reminders or tasks scheduled."
            return "\n".join(jobs.job_line(j, now) for j in found)
        if p.job_id is None:
            raise ToolError(f"{p.action} needs `job_id` (see list for the ids)")
        job = await jobs.change(sf, user_id=ctx.user_id, job_id=p.job_id, action=p.action, now=now)
        return {"cancel": "Cancelled", "pause": "Paused", "resume": "Resumed"}[p.action] + (
            f" #{job.id}: " + jobs.job_line(job, now)
        )

    return Tool(
        name="schedule",
        description=DESCRIPTION,
        params=ScheduleParams,
        run=run,
        capabilities=Capabilities(reads=("scheduled_jobs",), writes=("scheduled_jobs",)),
    )
