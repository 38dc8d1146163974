"""The `schedule` tool: reminders (a stored text sent at the time) and tasks (a prompt the
assistant runs at the time, with its tools, sending the answer)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, model_validator

from tools.base import Tool, ToolCall, ToolDeps, ToolError, ToolModule, json_schema
from tools.effects import effects
from tools.reminders import jobs
from tools.reminders.parse import Fields, build_spec
from tools.reminders.times import Spec, describe, local_text
from tools.state import Slot

# The jobs a request created: the answer carries an Undo button for each (tools/reminders/
# undo.py), as the person may not have wanted what a model read into their words.
CREATED: Slot[list[int]] = Slot("reminders.created", list)
NOT_IN_GROUP = (
    "Not listed: this is a group's check-in, read by every member, and the person's "
    "reminders and tasks are private."
)

# One line: each newline is a token more in every prompt.
DESCRIPTION = (
    "Reminders and tasks at the user's local time. create: `text`, `when` (their "
    "words) and `at` (YYYY-MM-DD HH:MM, tomorrow HH:MM), `in_minutes`, `every` (30m) or "
    "`daily_at` HH:MM (+ `days`: mon,fri); kind=task runs `text` as your prompt. "
    "list; cancel/pause/resume/edit by `job_id`."
)
# What a create or an edit may give: the text and the time.
CHANGES = ("text", "when", "at", "in_minutes", "every", "daily_at", "days")
# Reminders and tasks are kept for the user like memories; a task's own tool calls are gated
# when it runs.
READS, WRITES = effects(reads=("memory",)), effects(writes=("memory",))


class ScheduleParams(BaseModel):
    action: Literal["create", "list", "edit", "cancel", "pause", "resume"]
    kind: Literal["reminder", "task"] = "reminder"
    text: str | None = None
    when: str | None = None
    at: str | None = None
    in_minutes: int | None = None
    every: str | None = None
    daily_at: str | None = None
    days: str | None = None
    job_id: int | None = None

    @model_validator(mode="before")
    @classmethod
    def _infer_action(cls, data: Any) -> Any:
        """Small models leave out `action`: a text or a time means create (edit, with a job
        id); nothing but the kind means list (a bare job id stays unclear: cancel, pause or
        resume)."""
        if not isinstance(data, dict) or data.get("action"):
            return data
        if any(data.get(k) for k in CHANGES):
            return {**data, "action": "edit" if data.get("job_id") else "create"}
        if not any(v not in (None, "") for k, v in data.items() if k != "kind"):
            return {**data, "action": "list"}
        return data


# What the time fields hold, as the tool reads them (tools/reminders/parse.py), for a held
# reply: the 1.5B model wrote a field's name as another's value ("every": "daily_at").
_CLOCK = "[0-2]?[0-9]:[0-5][0-9]"
_DAY = "(mon|tue|wed|thu|fri|sat|sun)"
PATTERNS = {
    "at": f"^((today|tomorrow|[0-9]{{4}}-[0-9]{{2}}-[0-9]{{2}}) )?{_CLOCK}$",
    "every": "^[1-9][0-9]{0,3} ?(m|min|minutes?|h|hours?)$",
    "daily_at": f"^{_CLOCK}$",
    "days": f"^(weekdays|weekends|{_DAY}(,{_DAY}){{0,6}})$",
}


def _held() -> dict[str, Any]:
    """The argument sets `schedule` accepts, for a reply held to a grammar: a create names
    its time in one structured field beside `when`, the person's words (which the tool
    checks the field against), a list nothing but the kind, a change its job. Held to
    `parameters`, the 1.5B model filled every time field at once ("when": "in 2 minutes",
    "at": "…17:42", "in_minutes": 2, "every": "daily_at"); allowed `when` alone, it wrote
    "when": "now"; each time it was told so and wrote the same call again; allowed to leave
    `when` out, "every day at 8:00" became "every": "30m" (bench/tool_use.py, 2026-12-06)."""
    shown = json_schema(ScheduleParams)["properties"] | {
        f: {"type": "string", "pattern": p} for f, p in PATTERNS.items()
    }

    def variant(action: Any, *fields: str, required: tuple[str, ...] = ()) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {"action": action, **{f: shown[f] for f in fields}},
            "required": ["action", *required],
            "additionalProperties": False,
        }

    create = {"const": "create"}
    times = [("at",), ("in_minutes",), ("every", "days"), ("daily_at", "days")]
    return {
        "anyOf": [
            *(
                variant(create, "kind", "text", "when", *t, required=("text", "when", t[0]))
                for t in times
            ),
            variant({"const": "list"}, "kind"),
            variant({"enum": ["cancel", "pause", "resume"]}, "job_id", required=("job_id",)),
            variant({"const": "edit"}, "job_id", *CHANGES, required=("job_id",)),
        ]
    }


HELD = _held()


def build(deps: ToolDeps) -> Tool[ScheduleParams]:
    sf = deps.session_factory

    async def run(p: ScheduleParams, call: ToolCall) -> str:
        ctx = call.ctx
        now = ctx.now()
        if p.action == "create":
            spec = _spec(p, call)
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
            ctx.state(CREATED).append(job.id)  # shown with an Undo button under the answer
            nxt = local_text(job.next_run_at, ctx.timezone)
            return (
                f"Scheduled {job.kind} #{job.id}: {describe(spec)} ({ctx.timezone.key}); "
                f"next run {nxt}."
            )
        if p.action == "list":
            if ctx.scheduled and ctx.shared_chat:
                # A group's check-in: nobody there asked, and every member reads the answer.
                return NOT_IN_GROUP
            found = await jobs.listing(sf, ctx.user_id)
            if not found:
                return "No reminders or tasks scheduled."
            return "\n".join(jobs.job_line(j, now) for j in found)
        if p.job_id is None:
            raise ToolError(f"{p.action} needs `job_id` (see list for the ids)")
        if p.action == "edit":
            moved = _spec(p, call) if _timed(p) else None
            job = await jobs.edit(sf, user_id=ctx.user_id, job_id=p.job_id, now=now,
                                  text=p.text, spec=moved, words=p.when or "")  # fmt: skip
            return f"Changed #{job.id}: " + jobs.job_line(job, now)
        job = await jobs.change(sf, user_id=ctx.user_id, job_id=p.job_id, action=p.action, now=now)
        return f"{jobs.DONE[p.action]} #{job.id}: " + jobs.job_line(job, now)

    return Tool(
        "schedule",
        DESCRIPTION,
        ScheduleParams,
        run,
        effects=lambda p: READS if p.action == "list" else WRITES,
        held=HELD,
        refuses=refuses,
    )


def refuses(p: ScheduleParams, call: ToolCall) -> str | None:
    """A new or moved job's time and text, checked before anyone is asked to allow it."""
    try:
        if p.action == "create":
            jobs.new_job(p.kind, p.text or "", _spec(p, call), call.ctx.now())
        elif p.action == "edit" and _timed(p):
            _spec(p, call)
    except ToolError as exc:
        return str(exc)
    return None


def _fields(p: ScheduleParams) -> Fields:
    return Fields(p.at, p.in_minutes, p.every, p.daily_at, p.days)


def _timed(p: ScheduleParams) -> bool:
    return _fields(p).given() or bool(p.when and p.when.strip())


def _spec(p: ScheduleParams, call: ToolCall) -> Spec:
    return build_spec(_fields(p), p.when or "", call.ctx.now(), call.ctx.timezone)


TOOL = ToolModule(
    name="schedule",
    build=build,
    prompt="schedule: reminders and tasks at a time or on a repeat, in the user's time zone.",
)
