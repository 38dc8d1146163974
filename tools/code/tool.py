"""The `code` tool: execute (sandboxed bun, every run traced), generate, status."""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Literal

from pydantic import BaseModel, Field, model_validator
from pydantic.json_schema import SkipJsonSchema

from db.engine import SessionFactory
from tools.base import (
    Clock,
    ConfigError,
    FromOutside,
    Tool,
    ToolCall,
    ToolDeps,
    ToolError,
    ToolModule,
    ToolOutput,
    Unavailable,
    plain_brief,
)
from tools.chat import METERING
from tools.code import repo
from tools.code.bun import locate_bun, probe_bun, reachable
from tools.code.categories import classify
from tools.code.egress import EgressProxy
from tools.code.files import (
    INPUT_DIR,
    OUTPUT_DIR,
    OUTPUT_FILES,
    InputStore,
    read_regular,
    user_key,
)
from tools.code.jobs import JobManager, job_file
from tools.code.modes import bwrap_advice, choose_mode, protection
from tools.code.opencode import Budget, OpenCodeRunner, install_dir, locate_opencode
from tools.code.relay import ModelRelay
from tools.code.runner import CodeRunner, RunResult
from tools.code.sandbox import Mode, uid_block
from tools.code.settings import GENERATE_MEMORY_MB, GENERATE_TIMEOUT_S, CodeSettings
from tools.effects import NONE, SEEN, Effects, effects
from tools.fetch.policy import Policy

log = logging.getLogger(__name__)

# web_fetch's rule for the code's network; the refusal names the setting that opens it.
CODE_EGRESS = Policy(allow_private=False, opens="CODE_NETWORK=all")

MAX_TIMEOUT_MS = 120_000
# A run's limit when the model names none: long enough for a fetch and some parsing, short
# enough that a stuck loop does not hold the chat (the model may ask for up to MAX_TIMEOUT_MS).
DEFAULT_TIMEOUT_MS = 30_000
# Runs at once (more wait in a queue): each may take a core and up to 3 GiB of address space.
MAX_CONCURRENT = 2
STDOUT_FOR_MODEL = 4000
STDERR_FOR_MODEL = 2000

# Every token here sits in each request's prompt: a small model's context is 4k.
DESCRIPTION = (
    "Run JavaScript (Bun, sandboxed): execute `code`, an ES module printing with console.log "
    "(node:*, fetch; no npm), or generate: `task` becomes a program in the background "
    f"(job_id; status, abort). ./{INPUT_DIR}/: the user's files; ./{OUTPUT_DIR}/: sent to them."
)


# A run that succeeded and printed nothing: its value never reached the model.
PRINTED_NOTHING = (
    "it printed nothing: you read only what the program prints. Run it again with "
    "console.log(...) of the result."
)


class CodeParams(BaseModel):
    action: Literal["execute", "generate", "status", "abort"]
    code: str | None = Field(default=None, description="execute: the source")
    file: str | None = Field(
        default=None, description="execute: a generate job's `<job_id>/<path>`"
    )
    timeout_ms: SkipJsonSchema[int | None] = Field(  # validated, not shown
        default=None, ge=1, description="execute: at most 120000"
    )
    task: str | None = Field(default=None, description="generate: what to do")
    context: SkipJsonSchema[str | None] = None  # generate: details (the task says enough)
    job_id: str | None = Field(default=None, description="status, abort")
    network: bool | None = Field(default=None, description="needs the internet")

    @model_validator(mode="before")
    @classmethod
    def _infer_action(cls, data: Any) -> Any:
        """Small models leave out `action`, or describe a program to write only as its
        `context`: where the other fields say what is meant, it is that."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if not data.get("action"):
            if data.get("code"):
                data["action"] = "execute"
            elif data.get("task") or data.get("context"):
                data["action"] = "generate"
            elif data.get("job_id"):
                data["action"] = "status"
        if data.get("action") == "generate" and not data.get("task") and data.get("context"):
            data["task"] = data.pop("context")
        return data


def trim(text: str, limit: int, cut_before: bool) -> str:
    """At most `limit` chars, with a visible marker when anything was dropped."""
    if len(text) <= limit:
        return text + ("\n…[output truncated: the program printed more]" if cut_before else "")
    return text[:limit] + f"\n…[truncated: {len(text) - limit} more chars]"


def run_fields(res: RunResult, category: str | None, row_id: int) -> dict[str, Any]:
    """What the model reads of a run: the code tool's, and a skill's script's."""
    return {
        "success": category is None,
        "exit_code": res.exit_code,
        "stdout": trim(res.stdout, STDOUT_FOR_MODEL, res.stdout_truncated),
        "stderr": trim(res.sandbox_error or res.stderr, STDERR_FOR_MODEL, res.stderr_truncated),
        "execution_id": row_id,
    }


class CodeService:
    """What the tool and the doctor check share: the runner and the tracing."""

    def __init__(self, deps: ToolDeps) -> None:
        s = self.settings = deps.settings_for(CodeSettings)
        self.sf: SessionFactory = deps.session_factory
        self.clock: Clock = deps.clock
        network = self.network = s.code_network != "off"
        mode, self.mode_reason = choose_mode(s.code_sandbox)
        self.mode: Mode | Literal["refused"] = mode or "refused"
        private_ok = s.code_network == "all"
        self.protects = protection(mode, network, private_ok) if mode else "nothing runs"
        self.runner: CodeRunner | None = None
        self.problem: str | None = None
        try:
            bun = probe_bun(reachable(locate_bun()))  # the sandbox's uid runs it
        except ConfigError as exc:
            self.problem = str(exc)
        else:
            if mode is None:
                self.problem = self.mode_reason
            else:
                self.runner = CodeRunner(
                    bun,
                    mode,
                    network=network,
                    max_concurrent=MAX_CONCURRENT,
                    egress=None if private_ok else EgressProxy(CODE_EGRESS),
                )
        self.inputs = InputStore(deps.data_dir / "inputs")
        self.data_dir = deps.data_dir
        self.generator, self.generator_reason, opencode = self._generator(deps, s, mode)
        self.jobs = JobManager(
            deps.session_factory,
            deps.llm,
            deps.clock,
            data_dir=deps.data_dir,
            opencode=opencode,
            metering=deps.maybe(METERING),
            context_tokens=deps.endpoint.context_tokens if deps.endpoint else None,
        )
        deps.closers.append(self.jobs.close)
        deps.closers.append(self.close)

    def _generator(
        self, deps: ToolDeps, s: CodeSettings, mode: Mode | None
    ) -> tuple[str, str, OpenCodeRunner | None]:
        """Who writes code for `generate`, why, and OpenCode's runner when it is OpenCode."""
        if s.code_generator == "model":
            return "model", "CODE_GENERATOR=model", None
        install, endpoint = locate_opencode(), deps.endpoint
        problem = None
        if install is None:
            problem = f"OpenCode is not installed in {install_dir()} (make install-opencode)"
        elif self.runner is None:
            problem = f"code runs are off here ({self.problem})"
        elif mode != "bwrap":
            problem = f"OpenCode runs only in bubblewrap, and the sandbox here is {mode}"
        elif endpoint is None or not endpoint.model:
            problem = "no model endpoint to relay (LLM_MODEL)"
        if problem or install is None or self.runner is None or endpoint is None:
            if s.code_generator == "opencode":
                log.warning("CODE_GENERATOR=opencode, but %s: the model writes code", problem)
            return "model", f"one model call ({problem})", None
        policy = Policy(allow_private=s.code_network == "all", opens=CODE_EGRESS.opens)
        runner = OpenCodeRunner(
            install,
            self.runner.bun,
            ModelRelay(
                endpoint.base_url,
                endpoint.api_key,
                max_output_tokens=endpoint.max_output_tokens,
                metering=deps.maybe(METERING),
            ),
            endpoint.model,
            Budget(GENERATE_TIMEOUT_S, GENERATE_MEMORY_MB * 2**20),
            network=self.network,
            egress=EgressProxy(policy) if self.network else None,
            uid_base=uid_block(),
            others=endpoint.others,
        )
        return "opencode", f"OpenCode {install.version} in {install.folder}", runner

    def announce(self) -> None:
        """The start-up line (the tool's, once: doctor builds a service of its own and says
        the same in its lines)."""
        if self.runner is None:
            log.warning("code tool unavailable: %s", self.problem)
            return
        log.info(
            "code tool: bun %s at %s; sandbox %s (%s); protects %s%s",
            self.runner.bun.version,
            self.runner.bun.path,
            self.mode,
            self.mode_reason,
            self.protects,
            "" if self.mode == "bwrap" else f"; for the full sandbox, {bwrap_advice()}",
        )

    async def close(self) -> None:
        if self.runner is not None:  # the current one: tests swap it
            await self.runner.close()

    async def job_file(self, ref: str, user_id: int) -> str:
        """The text of a file a generate job of this user wrote (`<job_id>/<path>`)."""
        job_id, _, rel = ref.strip().partition("/")
        parts = [p for p in rel.split("/") if p not in ("", ".")]
        if not parts or ".." in parts:
            raise ToolError("file must be `<job_id>/<path>`, a path the job listed")
        job = await self.jobs.owned(job_id, user_id)
        if job is None:
            raise ToolError(f"no code job {job_id}")
        try:
            data = read_regular(job_file(self.data_dir, job.id, parts))
        except (OSError, ValueError) as exc:
            raise ToolError(f"job {job_id} has no file {'/'.join(parts)}") from exc
        return data.decode("utf-8", errors="replace")

    async def execute(
        self, code: str, timeout_ms: int, call: ToolCall | None, network: bool = True
    ) -> tuple[int, RunResult, str | None]:
        """Run and trace; returns (execution id, result, category). `network`: False runs
        it without the network, whatever the settings give."""
        if self.runner is None:
            raise ToolError(f"the code tool is not available: {self.problem}")
        ctx = call.ctx if call else None
        inputs = self.inputs.dir_for(user_key(ctx.telegram_user_id, ctx.user_id)) if ctx else None
        try:
            res = await self.runner.run(code, timeout_ms, inputs, network)
        except asyncio.CancelledError:
            res = RunResult("", "cancelled: the request ended before the run", None, 0.0)
            await asyncio.shield(self._trace(code, timeout_ms, call, res, "killed"))
            raise
        except Exception as exc:  # every run is traced, also one the host side failed
            log.exception("code run failed on the host side")
            res = RunResult("", "", None, 0.0, sandbox_error=f"the run failed: {exc!r}"[:500])
        category = classify(res)
        row_id = await self._trace(code, timeout_ms, call, res, category)
        return row_id, res, category

    async def _trace(
        self, code: str, timeout_ms: int, call: ToolCall | None, res: RunResult, cat: str | None
    ) -> int:
        ctx = call.ctx if call else None
        async with self.sf.begin() as s:
            row = await repo.add_execution(
                s,
                user_id=ctx.user_id if ctx else None,
                session_id=ctx.session_id if ctx else None,
                trigger_message=ctx.trigger_message_id if ctx else None,
                tool_call_id=call.call_id if call else "",
                llm_reasoning=call.reasoning if call else "",
                code=code,
                stdout=res.stdout,
                stderr=res.stderr if not res.sandbox_error else res.sandbox_error,
                stdout_truncated=res.stdout_truncated,
                stderr_truncated=res.stderr_truncated,
                exit_code=res.exit_code,
                duration_ms=res.duration_ms,
                timeout_ms=timeout_ms,
                success=cat is None,
                error_category=cat,
                sandbox_mode=self.mode,
                created_at=self.clock(),
            )
            return row.id


def build(deps: ToolDeps) -> Tool[CodeParams]:
    service = CodeService(deps)
    service.announce()
    if service.runner is None:
        raise Unavailable(service.problem or "bun cannot run here")

    async def run(p: CodeParams, call: ToolCall) -> dict[str, Any] | FromOutside:
        if p.action == "execute":
            if p.file and not p.code:
                p = p.model_copy(update={"code": await service.job_file(p.file, call.ctx.user_id)})
            if not p.code or not p.code.strip():
                raise ToolError("execute needs `code`: the ES module to run")
            timeout = min(p.timeout_ms or DEFAULT_TIMEOUT_MS, MAX_TIMEOUT_MS)
            # After outside content, a run gets the network only when the call asks for it
            # (and so asks the person: `effects` below); without it, nothing the run read
            # can leave, and it runs unasked ("sum column B of this CSV" after a document).
            outside = bool(call.ctx.state(SEEN).sources)
            network = bool(p.network) if outside else p.network is not False
            row_id, res, cat = await service.execute(p.code, timeout, call, network)
            out = run_fields(res, cat, row_id)
            out |= {"duration_ms": round(res.duration_ms), "error_category": cat}
            if res.outputs is not None and (res.outputs.files or res.outputs.skipped):
                call.ctx.state(OUTPUT_FILES).extend(res.outputs.files)
                out["files_sent_to_user"] = [name for name, _ in res.outputs.files]
                if res.outputs.skipped:
                    out["files_not_sent"] = res.outputs.skipped
            if res.timed_out:
                out["note"] = f"killed after the {timeout} ms timeout"
            elif res.output_limited:
                out["note"] = "killed: printed more than 1 MiB"
            elif res.disk_limited:
                out["note"] = (
                    "killed: wrote more than 128 MiB or 1000 files; write less under ./output/"
                )
            elif outside and not network and service.network and not p.network:
                out["note"] = (
                    "ran without the network, as outside content was read: set network "
                    "true if it needs the internet (the person is asked)"
                )
            elif cat is None and not res.stdout.strip() and not out.get("files_sent_to_user"):
                # A small model writes `12345 * 6789` and reads the empty result as done.
                out["note"] = PRINTED_NOTHING
            if res.reached is None or res.reached:
                # What it printed may be what a page said: outside content, as web_fetch's.
                hosts = ", ".join(res.reached[:5]) if res.reached else "the network"
                return FromOutside(f"the output of code that reached {hosts}", out)
            return out
        if p.action == "generate":
            if not p.task or not p.task.strip():
                raise ToolError("generate needs `task`: what the code should do")
            job_id, why = await service.jobs.start(call.ctx, p.task, p.context or "")
            hint = "call action=status with job_id"
            started = {"job_id": job_id, "status": "pending", "hint": hint}
            return {**started, "note": why} if why else started
        if not p.job_id:
            raise ToolError(f"{p.action} needs `job_id` (returned by generate)")
        if p.action == "abort":
            out = await service.jobs.abort(p.job_id, call.ctx.user_id)
        else:
            out = await service.jobs.status(p.job_id, call.ctx.user_id)
        if "summary" in out and service.network:
            # An OpenCode job with the network may have read anything: its own account of
            # what it did is outside content, as code's output that reached the network is.
            return FromOutside(f"the output of OpenCode job {p.job_id}", out)
        return out

    jobs_run = service.generator == "opencode"
    local = effects(writes=("execution",))
    networked = effects(writes=("execution", "internet")) if service.network else local

    def fx(p: CodeParams) -> Effects:
        """A run is networked when the call asks for the network; one that leaves it out
        has it only until the turn reads outside content (run() above), so it never needs
        a question for the network. An OpenCode job runs code too (its shell, the same
        sandbox, the settings' network)."""
        if p.action == "execute":
            return networked if p.network else local
        return networked if p.action == "generate" and jobs_run else NONE

    return Tool("code", DESCRIPTION, CodeParams, run, effects=fx, brief=printed, text_field="code")


def printed(output: ToolOutput) -> str | None:
    """What a run printed, when it succeeded and printed a little (the person's answer
    when a small model says nothing after it)."""
    if isinstance(output, dict) and output.get("success") and isinstance(output.get("stdout"), str):
        return plain_brief(output["stdout"])
    return None


TOOL = ToolModule(
    name="code",
    build=build,
    prompt="code: run JavaScript/TypeScript (Bun) for calculations, data wrangling and API calls.",
)
