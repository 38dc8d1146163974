"""Sending the user an OpenCode job's result when it ends, unasked: its summary and files
(documents, or one zip when there are many); then only the files sent are kept (jobs.py
job_kept, which `execute file=` runs). A part polling for settled, undelivered rows: the
job runs in the tool, which has no adapter to send through. At start it reports the jobs
an earlier run left pending as interrupted, and removes folders older than KEEP_DAYS.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import time
import zipfile
from pathlib import Path

from db.repos.core import Recipient, get_user
from tools.code import repo
from tools.code.files import read_regular
from tools.code.jobs import JOBS_FOLDER, OWNER, job_kept, job_work
from tools.code.models import CodeJob
from tools.code.tree import remove_tree
from tools.feature import Host
from tools.hooks import File
from tools.state import Key

log = logging.getLogger(__name__)

POLL_S = 2.0
KEEP_DAYS = 30
MAX_SEPARATE = 4  # more files than this go as one archive
MAX_FILE_BYTES = 20 * 1024 * 1024
MAX_TOTAL_BYTES = 45 * 1024 * 1024  # under Telegram's 50 MB for a bot's document
SUMMARY_CHARS = 3000
HEADS = {
    "done": "✅ Code job {id} is done",
    "failed": "❌ Code job {id} failed",
    "interrupted": "⚠️ Code job {id} was interrupted",
    "aborted": "⏹ Code job {id} was aborted",
}


def job_files(job: CodeJob, data_dir: Path) -> tuple[list[File], list[str]]:
    """The files to send (one zip when many) and what was left out, and why; the files
    sent are kept and the rest of the work dir removed."""
    found, left = read_files(job, data_dir)
    keep(job, data_dir, found)
    return packed(job, found), left


def read_files(job: CodeJob, data_dir: Path) -> tuple[list[File], list[str]]:
    """The files the job listed that can be sent, and what was left out, and why."""
    work = job_work(data_dir, job.id)
    found: list[File] = []
    left: list[str] = []
    total = 0
    for rel in job.files.splitlines():
        try:
            data = read_regular(work / rel)
        except (ValueError, OSError) as exc:
            left.append(f"{rel}: {exc}")
            continue
        if len(data) > MAX_FILE_BYTES or total + len(data) > MAX_TOTAL_BYTES:
            left.append(f"{rel}: too big to send")
            continue
        total += len(data)
        found.append((rel, data))
    return found, left


def keep(job: CodeJob, data_dir: Path, found: list[File]) -> None:
    """The files sent, kept (within the limits they were sent under); the work dir, with
    whatever else the job left there, removed."""
    kept = job_kept(data_dir, job.id)
    for rel, data in found:
        parts = [p for p in rel.split("/") if p not in ("", ".", "..")]
        if not parts:
            continue
        target = kept.joinpath(*parts)
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        target.write_bytes(data)
    kept.mkdir(mode=0o700, parents=True, exist_ok=True)  # delivered, even with no files
    remove_tree(job_work(data_dir, job.id))


def packed(job: CodeJob, found: list[File]) -> list[File]:
    if len(found) <= MAX_SEPARATE:
        return [(rel.replace("/", "_"), data) for rel, data in found]
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for rel, data in found:
            z.writestr(rel, data)
    return [(f"code-job-{job.id}.zip", buf.getvalue())]


def result_text(job: CodeJob, left: list[str]) -> str:
    head = HEADS.get(job.status, "Code job {id}: " + job.status).format(id=job.id)
    head += f" ({job.steps} steps, {job.duration_ms / 1000:.0f} s)."
    parts = [head]
    if job.error:
        parts.append(f"Why: {job.error}")
    if job.summary:
        cut = len(job.summary) > SUMMARY_CHARS
        parts.append(job.summary[:SUMMARY_CHARS] + ("…" if cut else ""))
    names = job.files.splitlines()
    if names:
        more = f" and {len(names) - 20} more" if len(names) > 20 else ""
        where = "in the archive" if len(names) > MAX_SEPARATE else "attached"
        parts.append(f"Files ({where}): {', '.join(names[:20])}{more}")
    elif job.status != "done":
        parts.append("It wrote no files.")
    if left:
        parts.append("Not sent: " + "; ".join(left[:5]))
    return "\n\n".join(parts)


def prune(folder: Path, before: float) -> None:
    """Remove the job folders last changed before `before` (epoch seconds)."""
    if not folder.is_dir():
        return
    for entry in folder.iterdir():
        with contextlib.suppress(OSError):  # gone meanwhile
            if entry.is_dir() and not entry.is_symlink() and entry.stat().st_mtime < before:
                remove_tree(entry)


class JobDelivery:
    def __init__(self, host: Host) -> None:
        self.host = host
        self._task = asyncio.create_task(self._loop(), name="code-job-delivery")

    async def stop(self) -> None:
        self._task.cancel()
        await asyncio.gather(self._task, return_exceptions=True)

    async def _loop(self) -> None:
        deps = self.host.deps
        try:
            async with deps.session_factory.begin() as s:
                n = await repo.interrupt_orphans(s, OWNER, deps.clock())
            if n:
                log.info("marked %d code job(s) of an earlier run as interrupted", n)
        except Exception:
            log.exception("could not sweep the code jobs of an earlier run")
        await asyncio.to_thread(prune, deps.data_dir / JOBS_FOLDER, time.time() - KEEP_DAYS * 86400)
        while True:
            try:
                await self.deliver_ready()
            except Exception:
                log.exception("delivering finished code jobs failed")
            await asyncio.sleep(POLL_S)

    async def deliver_ready(self) -> None:
        deps = self.host.deps
        async with deps.session_factory() as s:
            jobs = await repo.undelivered(s)
        for job in jobs:
            async with deps.session_factory.begin() as s:
                user = await get_user(s, job.user_id) if job.user_id is not None else None
                if not await repo.claim_delivery(s, job.id, deps.clock()):
                    continue
            if user is None:  # nobody to send it to: nothing of it is kept
                await asyncio.to_thread(remove_tree, job_work(deps.data_dir, job.id).parent)
                continue
            files, left = await asyncio.to_thread(job_files, job, deps.data_dir)
            recipient = Recipient(user.id, user.telegram_id, user.name or "")
            try:
                await self.host.deliver(recipient, result_text(job, left), False, files)
            except Exception as exc:  # one user's failure (blocked the bot) stops no one else's
                log.warning("could not deliver code job %s: %s", job.id, type(exc).__name__)


JOB_DELIVERY: Key[JobDelivery] = Key("code.job_delivery")
