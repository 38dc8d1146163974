"""`sidekick doctor` on reminders: the job count and the next due run."""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

from bot.app import App
from bot.ops.doctor import all_checks
from db.repos import core as core_repo
from tools.reminders import jobs
from tools.reminders.parse import Fields, build_spec


async def test_doctor_counts_jobs_and_shows_the_next_due_run(app: App) -> None:
    [check_reminders] = [c for c in all_checks(app.features) if c.__name__ == "check_reminders"]
    [line] = await check_reminders(app)
    assert line.ok and line.detail.startswith("0 active, 0 paused job(s); next due run none")
    now = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)
    async with app.session_factory() as s, s.begin():
        user = await core_repo.get_or_create_user(s, 42, "Ann", now)
    berlin = ZoneInfo("Europe/Berlin")
    for at in ("2030-01-02 08:00", "2030-01-01 08:00"):
        spec = build_spec(Fields(at=at), "", now, berlin)
        await jobs.create(app.session_factory, user_id=user.id, kind="reminder", text="x",
                          words="", spec=spec, now=now)  # fmt: skip
    [line] = await check_reminders(app)
    assert line.detail == (
        "2 active, 0 paused job(s); next due run 2030-01-01 07:00 UTC; "
        "0 run(s) waiting to be delivered"
    )
