"""`generate` / `status` / `abort`: code written in the background, tracked in code_jobs,
by OpenCode (opencode.py; its steps shown while it runs, its files sent by delivery.py) or
by one model completion returning one program, which `status` hands back.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import Any

from db.engine import SessionFactory
from tools.base import Clock, RequestContext, TextModel
from tools.chat import Metering
from tools.code import repo
from tools.code.files import safe_name
from tools.code.models import CodeJob
from tools.code.opencode import JOB_DISK_BYTES, OpenCodeRunner, Progress
from tools.code.relay import RelayJob, relay_models
from tools.code.tree import walk_files
from tools.errors import public_text
from tools.model_call import ModelCall

log = logging.getLogger(__name__)

CODING_PROMPT = (
    "You write one self-contained program for the Bun runtime (JavaScript or TypeScript, "
    "an ES module; top-level await works). Use only built-ins: Bun APIs, node:* modules, "
    "fetch. No npm packages: nothing can be installed. Print the result with console.log. "
    "Answer with the program in a single ```ts code block and nothing else."
)
MAX_TOKENS = 4000
_FENCE = re.compile(r"```[a-zA-Z]*[ \t]*\n(.*?)```", re.DOTALL)
# This process: a pending job of another owner is an orphan of an earlier run.
OWNER = uuid.uuid4().hex
JOBS_FOLDER = "code-jobs"
MAX_LISTED = 200  # files named in a job's trace
SHUTDOWN = "the bot shut down before the job finished"
# OpenCode's own first request (its system prompt and tool schemas) was 7,293 tokens on
# Qwen2.5's tokenizer (OpenCode 1.x, 2026-12): with room for its answer, a context smaller
# than this cannot hold one step of a job, and the model writes the program itself.
OPENCODE_CONTEXT = 8192
NOTHING_MADE = (
    "it ended without writing a file: OpenCode's model ran {steps} step(s) and no tool made "
    "anything (a small model may write its tool calls as text, which OpenCode does not run)"
)


def job_work(data_dir: Path, job_id: str) -> Path:
    """A job's work dir: OpenCode's /work, kept after the job for delivery and `execute`."""
    return data_dir / JOBS_FOLDER / safe_name(job_id) / "work"


def job_kept(data_dir: Path, job_id: str) -> Path:
    """What stays of a job once it is delivered: the files the user was sent, nothing else
    of its work dir (delivery.py)."""
    return data_dir / JOBS_FOLDER / safe_name(job_id) / "files"


def job_file(data_dir: Path, job_id: str, parts: list[str]) -> Path:
    """Where a file a job wrote is now: among the kept ones once delivered, else in the
    work dir."""
    kept = job_kept(data_dir, job_id)
    return (kept if kept.is_dir() else job_work(data_dir, job_id)).joinpath(*parts)


def written(work: Path) -> list[str]:
    """The files a job wrote (paths below its work dir), leaving out hidden ones (.git,
    OpenCode's own) and anything under a hidden folder."""
    if not work.is_dir():
        return []
    found = walk_files(str(work)).files
    return [f.rel for f in found if not any(p.startswith(".") for p in f.rel.split("/"))]


def _prompt(task: str, context: str) -> str:
    return f"Task:\n{task}" + (f"\n\nContext:\n{context}" if context else "")


def extract_code(reply: str) -> str:
    """The first fenced block, or the whole reply when it has no fence."""
    m = _FENCE.search(reply)
    return (m.group(1) if m else reply).strip()


@dataclass(eq=False)  # compared and hashed by identity, as a service is
class JobManager:
    """Runs generation jobs as asyncio tasks; the rows outlive the process."""

    sf: SessionFactory
    llm: TextModel
    clock: Clock
    _: KW_ONLY
    data_dir: Path = Path("./data")
    opencode: OpenCodeRunner | None = None
    metering: Metering | None = None
    context_tokens: Callable[[], Awaitable[int | None]] | None = None
    tasks: dict[str, asyncio.Task[None]] = field(default_factory=dict, init=False)
    live: dict[str, tuple[Progress, float]] = field(default_factory=dict, init=False)
    _aborted: set[str] = field(default_factory=set, init=False)
    _swept: bool = field(default=False, init=False)

    async def _sweep(self) -> None:
        if not self._swept:
            async with self.sf.begin() as s:
                n = await repo.interrupt_orphans(s, OWNER, self.clock())
            if n:
                log.info("marked %d code job(s) of an earlier run as interrupted", n)
            self._swept = True

    async def too_small(self) -> str | None:
        """Why OpenCode cannot run a job on this model (None: it can, or nobody knows)."""
        if self.opencode is None or self.context_tokens is None:
            return None
        try:
            held = await self.context_tokens()
        except Exception:  # the job itself will say what is wrong with the server
            log.debug("the model's context could not be asked", exc_info=True)
            return None
        if held is None or held >= OPENCODE_CONTEXT:
            return None
        return (
            f"OpenCode's prompt needs about {OPENCODE_CONTEXT:,} tokens and the model's "
            f"context holds {held:,}, so the model writes the program in one call instead."
        )

    async def start(self, ctx: RequestContext, task: str, context: str) -> tuple[str, str | None]:
        """The new job's id, and the line that says why OpenCode does not run it (None: it
        does, or the model writes code here anyway)."""
        await self._sweep()
        job_id = uuid.uuid4().hex[:12]
        why = await self.too_small()
        opencode = None if why else self.opencode
        call = ModelCall("code", ctx.user_id, ctx.session_id, ctx.request_id)
        relay = await self.relay_job(call) if opencode is not None else None
        async with self.sf.begin() as s:
            await repo.add_job(
                s,
                id=job_id,
                user_id=ctx.user_id,
                session_id=ctx.session_id,
                task=task,
                context=context,
                generator="opencode" if opencode else "llm",
                model=relay.models[0] if relay else "",
                owner=OWNER,
                created_at=self.clock(),
            )
        if opencode is not None and relay is not None:
            work = job_work(self.data_dir, job_id)
            work.mkdir(mode=0o700, parents=True)
            self.live[job_id] = (Progress(), time.monotonic())
            job = self._opencode_job(job_id, task, context, work, opencode, relay)
        else:
            if why:
                log.info("code job %s: %s", job_id, why)
            job = self._work(job_id, task, context, call)
        t = asyncio.create_task(job, name=f"code-job-{job_id}")
        self.tasks[job_id] = t
        t.add_done_callback(lambda _t: self.tasks.pop(job_id, None))
        return job_id, why

    async def relay_job(self, call: ModelCall) -> RelayJob:
        """The job's calls: the user's, on the model they picked with /model (else the
        default), and only on the models the bot offers."""
        assert self.opencode is not None
        runner = self.opencode
        picked = None
        if self.metering is not None and call.user_id is not None:
            picked = await self.metering.chosen_model(call.user_id)
        offered = relay_models(runner.model, runner.others)
        first = picked if picked in offered else runner.model
        return RelayJob(call, relay_models(first, offered))

    async def _work(
        self, job_id: str, task: str, context: str, call: ModelCall | None = None
    ) -> None:
        status, code, error = "failed", None, None
        try:
            messages: list[dict[str, Any]] = [{"role": "system", "content": CODING_PROMPT}]
            messages.append({"role": "user", "content": _prompt(task, context)})
            reply = await self.llm.complete_text(messages, max_tokens=MAX_TOKENS, call=call)
            code = extract_code(reply or "")
            if code:
                status = "done"
            else:
                error, code = "the model returned no code", None
        except asyncio.CancelledError:
            status, error = "interrupted", SHUTDOWN
            raise
        except Exception as exc:
            log.warning("code job %s failed: %s", job_id, type(exc).__name__)
            error = public_text(exc)  # a provider's error text may echo the API key
        finally:
            await self._store(job_id, status=status, code=code, error=error)

    async def _opencode_job(
        self,
        job_id: str,
        task: str,
        context: str,
        work: Path,
        runner: OpenCodeRunner,
        relay: RelayJob,
    ) -> None:
        progress, _ = self.live[job_id]
        status, error, started = "failed", None, time.monotonic()
        try:
            run = await runner.run(work, _prompt(task, context), progress, relay)
            if run.timed_out:
                error = f"stopped after its {runner.budget.timeout_s:.0f} s budget"
            elif run.memory_exceeded:
                error = f"stopped: it used over {runner.budget.memory_bytes // 2**20} MB"
            elif run.disk_exceeded:
                error = f"stopped: it wrote over {JOB_DISK_BYTES // 2**20} MB in its folder"
            elif run.exit_code == 0 and not progress.error:
                status = "done"
            else:
                lines = [ln for ln in run.stderr.splitlines() if ln.strip()]
                error = progress.error or (lines[-1][:500] if lines else f"exit {run.exit_code}")
        except asyncio.CancelledError:
            aborted = job_id in self._aborted
            status = "aborted" if aborted else "interrupted"
            error = "aborted on request" if aborted else SHUTDOWN
            raise
        except Exception as exc:
            log.exception("code job %s failed on the host side", job_id)
            error = public_text(exc)
        finally:
            self.live.pop(job_id, None)
            self._aborted.discard(job_id)
            files = await asyncio.to_thread(written, work)
            summary = progress.summary or None
            if status == "done" and not files:
                # Nothing to show for it: a failure, and OpenCode's model's closing words
                # (which may tell of a file it never wrote) are not passed on as its result.
                status, error, summary = "failed", NOTHING_MADE.format(steps=progress.steps), None
            await self._store(
                job_id,
                status=status,
                error=error,
                steps=progress.steps,
                duration_ms=(time.monotonic() - started) * 1000,
                files="\n".join(files[:MAX_LISTED]),
                summary=summary,
            )

    async def _store(self, job_id: str, **values: Any) -> None:
        try:
            async with self.sf.begin() as s:
                await repo.finish_job(s, job_id, now=self.clock(), **values)
        except Exception:
            log.exception("could not store the result of code job %s", job_id)

    async def owned(self, job_id: str, user_id: int) -> CodeJob | None:
        async with self.sf() as s:
            job = await repo.get_job(s, job_id)
        return job if job is not None and job.user_id == user_id else None

    async def status(self, job_id: str, user_id: int) -> dict[str, Any]:
        await self._sweep()
        job = await self.owned(job_id, user_id)
        if job is None:
            return {"job_id": job_id, "status": "unknown", "error": "no such job"}
        out: dict[str, Any] = {"job_id": job.id, "status": job.status}
        live = self.live.get(job.id)
        if job.status == "pending" and live is not None:
            progress, started = live
            out |= {"status": "running", "steps": progress.steps,
                    "last_action": progress.last_action or "starting",
                    "elapsed_s": round(time.monotonic() - started)}  # fmt: skip
        elif job.generator == "opencode" and job.status != "pending":
            out["files"] = job.files.splitlines()
            if job.summary:
                out["summary"] = job.summary
            if job.error:
                out["error"] = job.error
            out["note"] = (
                "the summary and files are sent to the user by themselves; run a file "
                "with action=execute, file=<job_id>/<path>"
            )
        elif job.status == "done":
            out["code"] = job.code
        elif job.error:
            out["error"] = job.error
        return out

    async def abort(self, job_id: str, user_id: int) -> dict[str, Any]:
        """End a running job (its whole sandbox); what it wrote is kept and delivered."""
        job = await self.owned(job_id, user_id)
        if job is None:
            return {"job_id": job_id, "status": "unknown", "error": "no such job"}
        task = self.tasks.get(job_id)
        if job.status != "pending" or task is None:
            return {"job_id": job_id, "status": job.status, "note": "the job is not running"}
        self._aborted.add(job_id)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        return await self.status(job_id, user_id)

    async def close(self) -> None:
        """At shutdown: stop every job and mark it interrupted (a task cancelled before it
        ever ran never reaches its own `finally`)."""
        jobs = dict(self.tasks)
        for t in jobs.values():
            t.cancel()
        await asyncio.gather(*jobs.values(), return_exceptions=True)
        if self.opencode is not None:
            await self.opencode.close()
        if not jobs:
            return
        try:
            async with self.sf.begin() as s:
                for job_id in jobs:
                    await repo.finish_job(
                        s, job_id, status="interrupted", now=self.clock(), error=SHUTDOWN
                    )
        except Exception:
            log.exception("could not mark code jobs as interrupted")
