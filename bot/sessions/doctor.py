"""What `sidekick doctor` says about sessions: the split job, what is due, failing archives
and the long-session summaries."""

from __future__ import annotations

from datetime import datetime

from bot.sessions import history, repo
from bot.sessions.settings import SessionSettings
from bot.sessions.split import EVERY as SPLIT_EVERY
from db.engine import SessionFactory
from tools.base import CheckResult

FAILING_AFTER = 3  # attempts before doctor calls an archive failing


async def session_checks(
    settings: SessionSettings, session_factory: SessionFactory, now: datetime
) -> list[CheckResult]:
    policy = settings.session_policy
    tz = policy.default_tz
    nxt = policy.next_split(now, tz)
    if nxt is None:
        split_detail = "SESSION_SPLIT=none: sessions are not split by time"
    else:
        local = nxt.astimezone(tz)
        split_detail = (
            f"SESSION_SPLIT={settings.session_split}; next split "
            f"{local:%Y-%m-%d %H:%M %Z} ({settings.timezone})"
        )
    every = SPLIT_EVERY.total_seconds() / 60
    split = f"next run: at bot start, then every {every:g} min; {split_detail}"
    out = [CheckResult("job session-split", True, split)]
    async with session_factory() as s:
        open_ = await repo.open_candidates(s, now)
        pending = await repo.unarchived_ended(s, now)
        own = sum(1 for _, z in await repo.users_timezones(s) if z)
        failing = await repo.failing_archives(s, FAILING_AFTER)
    due = [c for c in open_ if policy.is_due(c.started_at, now, c.timezone)]
    detail = (
        f"{len(open_)} open, {len(due)} due for a split, {len(pending)} summaries pending; "
        f"{own} user(s) with their own time zone"
    )
    out.append(CheckResult("sessions", True, detail))
    if failing:
        worst = failing[0]
        detail = (
            f"{len(failing)} session(s) failed {FAILING_AFTER}+ times; last error of "
            f"#{worst[0]}: {worst[1]}"
        )
        fix = "check the model endpoint (LLM_*); archiving retries by itself, nothing is lost"
        out.append(CheckResult("session archiving", False, detail, fix))
    return out


async def summaries_check(session_factory: SessionFactory) -> list[CheckResult]:
    async with session_factory() as s:
        verified, rejected = await repo.compression_counts(s)
    review = history.SUMMARY_REVIEW
    detail = f"{verified} verified, {rejected} rejected or failed (SUMMARY_REVIEW={review})"
    return [CheckResult("session summaries", True, detail)]
