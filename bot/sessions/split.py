"""The split job: archives every session whose period ended, and closed sessions still
without a summary. What is due comes from the data, so a run missed while the bot was down
is made up by the next one, exactly once."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from bot.sessions import repo
from bot.sessions.settings import SessionSettings
from db.engine import SessionFactory
from tools.base import Clock
from tools.state import Key

if TYPE_CHECKING:  # the summary and memory machinery: only when one is archived
    from bot.sessions.archive import Archiver

log = logging.getLogger(__name__)

# A split lands within a minute of the time of SESSION_SPLIT in every user's own time zone,
# whatever the zone, without one cron job per zone.
EVERY = timedelta(minutes=1)


@dataclass
class SplitReport:
    archived: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)
    # Grew while being summarised, or another writer holds it.
    deferred: list[int] = field(default_factory=list)

    @property
    def total(self) -> int:
        return len(self.archived) + len(self.failed) + len(self.deferred)


def _ids(ids: list[int], shown: int = 20) -> str:
    more = f" +{len(ids) - shown} more" if len(ids) > shown else ""
    return f"{ids[:shown]}{more}"


@dataclass
class SessionSplit:
    settings: SessionSettings
    session_factory: SessionFactory
    # None when memory is off: there is nowhere to archive to, so sessions are left alone
    # (a new message still closes one whose period ended).
    archiver: Archiver | None
    clock: Clock
    concurrency: int = 4
    _ran: bool = field(default=False, init=False)

    async def due_sessions(self, now: datetime) -> list[repo.Candidate]:
        policy = self.settings.session_policy
        async with self.session_factory() as s:
            pending = await repo.unarchived_ended(s, now)
            open_ = await repo.open_candidates(s, now)
        due = [c for c in open_ if policy.is_due(c.started_at, now, c.timezone)]
        return pending + due

    async def split_sessions(self) -> SplitReport:
        now = self.clock()
        report = SplitReport()
        archiver = self.archiver
        if archiver is None:
            return report
        gate = asyncio.Semaphore(self.concurrency)

        async def one(c: repo.Candidate) -> None:
            async with gate:
                try:
                    result = await archiver.archive(c.session_id)
                except Exception:
                    log.exception("archiving session %d crashed", c.session_id)
                    report.failed.append(c.session_id)
                    return
            if result.done:
                report.archived.append(c.session_id)
            elif result.status in ("grew", "busy"):
                report.deferred.append(c.session_id)
            else:
                report.failed.append(c.session_id)

        await asyncio.gather(*(one(c) for c in await self.due_sessions(now)))
        for ids in (report.archived, report.failed, report.deferred):
            ids.sort()
        if report.total:
            log.info(
                "session split: %d archived %s, %d failed %s, %d deferred",
                len(report.archived),
                _ids(report.archived),
                len(report.failed),
                _ids(report.failed),
                len(report.deferred),
            )
        elif not self._ran:
            log.info("session split at startup: nothing due")
        else:
            log.debug("session split: nothing due")
        self._ran = True
        return report

    async def stop(self) -> None:
        """Nothing to release: a run cut short is redone by the next start."""


SPLIT: Key[SessionSplit] = Key("sessions.split")
