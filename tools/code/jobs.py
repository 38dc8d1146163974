"""`generate` / `status`: code written in the background by a model, tracked in code_jobs."""

from __future__ import annotations

import asyncio
import logging
import re
import uuid
from typing import Any

from db.engine import SessionFactory
from tools.base import Clock, RequestContext, TextModel
from tools.code import repo
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


def extract_code(reply: str) -> str:
    """The first fenced block, or the whole reply when it has no fence."""
    m = _FENCE.search(reply)
    return (m.group(1) if m else reply).strip()


class JobManager:
    """Runs generation jobs as asyncio tasks; the rows outlive the process."""

    def __init__(self, session_factory: SessionFactory, llm: TextModel, clock: Clock) -> None:
        self.sf = session_factory
        self.llm = llm
        self.clock = clock
        self.owner = uuid.uuid4().hex  # this process; pending jobs of others are orphans
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self._swept = False

    async def _sweep(self) -> None:
        if not self._swept:
            async with self.sf.begin() as s:
                n = await repo.interrupt_orphans(s, self.owner, self.clock())
            if n:
                log.info("marked %d code job(s) of an earlier run as interrupted", n)
            self._swept = True

    async def start(self, ctx: RequestContext, task: str, context: str) -> str:
        await self._sweep()
        job_id = uuid.uuid4().hex[:12]
        async with self.sf.begin() as s:
            await repo.add_job(
                s,
                id=job_id,
                user_id=ctx.user_id,
                session_id=ctx.session_id,
                task=task,
                context=context,
                generator="llm",
                owner=self.owner,
                created_at=self.clock(),
            )
        call = ModelCall("code", ctx.user_id, ctx.session_id, ctx.request_id)
        t = asyncio.create_task(self._work(job_id, task, context, call), name=f"code-job-{job_id}")
        self.tasks[job_id] = t
        t.add_done_callback(lambda _t: self.tasks.pop(job_id, None))
        return job_id

    async def _work(
        self, job_id: str, task: str, context: str, call: ModelCall | None = None
    ) -> None:
        status, code, error = "failed", None, None
        try:
            messages: list[dict[str, Any]] = [{"role": "system", "content": CODING_PROMPT}]
            body = f"Task:\n{task}" + (f"\n\nContext:\n{context}" if context else "")
            messages.append({"role": "user", "content": body})
            reply = await self.llm.complete_text(messages, max_tokens=MAX_TOKENS, call=call)
            code = extract_code(reply or "")
            if code:
                status = "done"
            else:
                error, code = "the model returned no code", None
        except asyncio.CancelledError:
            status, error = "interrupted", "the bot shut down before the job finished"
            raise
        except Exception as exc:
            log.warning("code job %s failed: %s", job_id, type(exc).__name__)
            error = public_text(exc)  # a provider's error text may echo the API key
        finally:
            try:
                async with self.sf.begin() as s:
                    await repo.finish_job(
                        s, job_id, status=status, now=self.clock(), code=code, error=error
                    )
            except Exception:
                log.exception("could not store the result of code job %s", job_id)

    async def status(self, job_id: str, user_id: int) -> dict[str, Any]:
        await self._sweep()
        async with self.sf() as s:
            job = await repo.get_job(s, job_id)
        if job is None or job.user_id != user_id:
            return {"job_id": job_id, "status": "unknown", "error": "no such job"}
        out: dict[str, Any] = {"job_id": job.id, "status": job.status}
        if job.status == "done":
            out["code"] = job.code
        elif job.error:
            out["error"] = job.error
        return out

    async def close(self) -> None:
        """At shutdown: stop every job and mark it interrupted (a task cancelled before it
        ever ran never reaches its own `finally`)."""
        jobs = dict(self.tasks)
        for t in jobs.values():
            t.cancel()
        if not jobs:
            return
        await asyncio.gather(*jobs.values(), return_exceptions=True)
        try:
            async with self.sf.begin() as s:
                for job_id in jobs:
                    await repo.finish_job(
                        s,
                        job_id,
                        status="interrupted",
                        now=self.clock(),
                        error="the bot shut down before the job finished",
                    )
        except Exception:
            log.exception("could not mark code jobs as interrupted")
