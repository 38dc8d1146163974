"""Check-ins: the assistant speaks first, when a person turned it on (in their chat, or a
group where they asked for it) and it has something worth saying (bot/checkins/runs.py),
within their quiet hours, daily cap and the budget."""

from __future__ import annotations

from datetime import timedelta

from tools.feature import Command, Feature, Host, Job, Setup


def setup() -> Setup:
    from bot.checkins import commands
    from bot.checkins.models import CheckinGroup, CheckinPrefs, CheckinRun
    from bot.checkins.runs import Outcome, tick

    async def run_due(host: Host) -> list[Outcome]:
        return await tick(host, host.deps.clock())

    return Setup(
        models=(CheckinPrefs, CheckinGroup, CheckinRun),
        commands=(
            Command(
                "checkins",
                "the assistant checks in first: on/off, time, quiet hours, cost",
                commands.checkins,
                args="[on|off|at HH:MM|quiet HH:MM-HH:MM|max N|topic …]",
            ),
        ),
        press=commands.press,
        jobs=(Job("checkins", "send the check-ins that are due", timedelta(minutes=1), run_due),),
    )


FEATURE = Feature(name="checkins", setup=setup)
