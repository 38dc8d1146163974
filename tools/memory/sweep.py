"""The hourly memory sweep: memories past their lifetime go, and session memories whose
session has ended (MemoryStore.sweep)."""

from __future__ import annotations

import logging
from datetime import timedelta

from tools.feature import Host
from tools.memory.store import MEMORY

log = logging.getLogger(__name__)

EVERY = timedelta(hours=1)


async def sweep(host: Host) -> int:
    """How many memories it deleted."""
    removed = await host.part(MEMORY).sweep(host.deps.clock())
    # Hourly, so always at INFO: the log shows the sweep runs.
    log.info("memory sweep: %d expired memories removed", removed)
    return removed
