"""Re-embedding in the background after an upgrade: when the index was built by another
embedder than the configured one (a new default model, a changed EMBEDDINGS), the bot
re-embeds every memory itself once it has started, batch by batch, while it answers (recall
matches words only until the new vectors are in). Progress goes to the log and to the
index's meta row, which `sidekick status` reads; a restart midway starts over.

The terminal chat leaves it to the bot, as it leaves the session split (one writer)."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from db.engine import SessionFactory
from tools.feature import Host
from tools.memory import repo
from tools.memory.store import MEMORY, MemoryStore
from tools.state import Key

log = logging.getLogger(__name__)

PROGRESS = "reembed"  # memory_meta key: "<done>/<total> <embedder>", or "" when none runs
LOG_EVERY = 0.1  # of the memories, between progress lines in the log


@dataclass
class Reembed:
    task: asyncio.Task[None] | None = None
    done: int = 0
    total: int = 0
    _logged: float = field(default=0.0, repr=False)

    async def stop(self) -> None:
        if self.task is not None and not self.task.done():
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)


REEMBED: Key[Reembed] = Key("memory.reembed")


async def start(host: Host) -> Reembed:
    """Starts re-embedding when the index is stale (not in the terminal chat)."""
    job = Reembed()
    if host.local:
        return job
    store = await host.need(MEMORY)
    status = await store.index_status()
    if status.ok:
        return job
    job.task = asyncio.create_task(_run(job, store), name="reembed")
    return job


async def _run(job: Reembed, store: MemoryStore) -> None:
    name = store.embedder.name
    log.info("memory: re-embedding every memory with %s in the background", name)

    def progress(done: int, total: int) -> None:
        job.done, job.total = done, total
        if total and (done == total or done / total - job._logged >= LOG_EVERY):
            job._logged = done / total
            log.info("memory: re-embedded %d/%d with %s", done, total, name)

    try:
        await store.reindex(progress, mark=PROGRESS)
    except asyncio.CancelledError:
        raise
    except Exception:
        log.exception("memory: re-embedding with %s failed; recall matches words only", name)
        return
    log.info("memory: re-embedded %d memories with %s; recall uses them now", job.done, name)


async def status_line(sf: SessionFactory) -> str | None:
    """`sidekick status`'s memory line: the index's model and a re-embedding under way."""
    async with sf() as s:
        meta = await repo.meta(s)
    model = meta.get("model")
    if model is None:
        return None
    running = meta.get(PROGRESS, "")
    if running:
        return f"memory:      re-embedding {running} (recall matches words until done)"
    return f"memory:      index built with {model}"
