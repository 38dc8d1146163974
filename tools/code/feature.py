"""Code: the `code` tool (JavaScript/TypeScript run by bun in a sandbox, every run traced;
code written in the background by OpenCode or the model), its tables, the delivery of a
finished job, /codestats and /codefailures with the button that sends a run as a file, and
its doctor check (bun, the sandbox, a real trial run)."""

from __future__ import annotations

from tools.code.settings import CodeSettings
from tools.feature import Command, Feature, Host, Provide, Setup

STATS = "your code runs: successes, failures, timing"
FAILURES = "your last failed code runs, with code and errors"


def setup() -> Setup:
    from tools.base import CheckResult
    from tools.code import commands
    from tools.code.delivery import JOB_DELIVERY, JobDelivery
    from tools.code.doctor import check_code
    from tools.code.files import FilesOut
    from tools.code.models import CodeExecution, CodeJob
    from tools.code.tool import TOOL
    from tools.hooks import Always

    async def delivery(host: Host) -> JobDelivery:
        return JobDelivery(host)

    async def check(host: Host) -> list[CheckResult]:
        return await check_code(host.deps)

    return Setup(
        tools=(TOOL,),
        models=(CodeExecution, CodeJob),
        commands=(
            Command("codestats", STATS, commands.codestats, args="[days]"),
            Command("codefailures", FAILURES, commands.codefailures, args="[n]"),
        ),
        press=commands.press,
        # A finished OpenCode job's summary and files, sent unasked.
        parts=(Provide(JOB_DELIVERY, delivery, JobDelivery.stop, on_start=True),),
        # what a run wrote to ./output/ goes with the answer
        turns=(lambda host: Always(FilesOut()),),
        doctor=check,
    )


FEATURE = Feature(name="code", settings=CodeSettings, setup=setup)
