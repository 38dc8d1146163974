"""Reminders and scheduled tasks: the `schedule` tool, its tables, /reminders and /quiet,
and the job that fires what is due: on the second, with a minute tick behind it
(tools/reminders/firing.py)."""

from __future__ import annotations

from typing import Any

from tools.feature import Command, Feature, Host, Job, Provide, Setup


def setup() -> Setup:
    from tools.admission import ADMISSION
    from tools.hooks import Always, Gate, Only
    from tools.reminders import commands, doctor
    from tools.reminders.asked import AskedFirst
    from tools.reminders.firing import EVERY, JOB_ID, REMINDERS, ReminderJobs
    from tools.reminders.models import JobRun, ReminderPrefs, ScheduledJob
    from tools.reminders.tool import TOOL, ScheduleParams
    from tools.reminders.undo import UndoButtons

    async def firing(host: Host) -> ReminderJobs:
        deps = host.deps
        jobs = ReminderJobs(
            session_factory=deps.session_factory,
            deliver=host.deliver,
            run_task=host.ask,
            clock=deps.clock,
            local=host.local,
        )
        if host.has(ADMISSION):  # a person the owner removes gets nothing more from here
            admission = await host.need(ADMISSION)
            jobs.admits = admission.admits
            admission.on_removal(jobs.removed)
        return jobs

    async def fire_due(host: Host) -> Any:
        jobs = host.part(REMINDERS)
        report = await jobs.tick()
        jobs.arm()  # after the start-up catch-up: from now on each reminder fires on its second
        return report

    def asked_first(host: Host) -> Gate:
        endpoint = host.deps.endpoint
        asked = AskedFirst(host.deps.session_factory, endpoint.parameters if endpoint else None)
        return Only((ScheduleParams,), asked)

    async def check(host: Host) -> list[Any]:
        return await doctor.reminder_checks(host.deps.session_factory, host.deps.clock())

    return Setup(
        tools=(TOOL,),
        models=(ScheduledJob, JobRun, ReminderPrefs),
        commands=(
            Command("reminders", "your reminders and tasks", commands.reminders, args="[history]"),
            Command(
                "quiet",
                "hold reminders back during those hours",
                commands.quiet,
                args="HH:MM-HH:MM",
            ),
        ),
        press=commands.press,
        jobs=(Job(JOB_ID, "deliver due reminders and scheduled tasks", EVERY, fire_due),),
        parts=(Provide(REMINDERS, firing, ReminderJobs.stop, on_start=True),),
        gates=(asked_first,),
        turns=(lambda host: Always(UndoButtons()),),
        doctor=check,
    )


FEATURE = Feature(name="reminders", setup=setup)
