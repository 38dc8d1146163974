"""/reminders (upcoming jobs with pause/resume/cancel buttons), /reminders history (the
run ledger) and /quiet HH:MM-HH:MM (quiet hours that hold reminders back)."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Literal
from zoneinfo import ZoneInfo

from aiogram import Bot, Router
from aiogram.filters import Command, CommandObject
from aiogram.filters.callback_data import CallbackData
from aiogram.types import CallbackQuery, InlineKeyboardButton, InlineKeyboardMarkup, Message

from bot.app import App
from bot.telegram.render import send_chunk, send_plain
from bot.telegram.user import ChatUser, use_user
from db.models.schedule import ScheduledJob
from db.repos import schedule as repo
from scheduler.periods import parse_hhmm
from tools.base import ToolError
from tools.schedule import jobs
from tools.schedule.times import local_text

HISTORY = 15
STATUS_MARK = {
    "sent": "✅",
    "failed": "❌",
    "delivery_failed": "📭",
    "skipped": "⏭",
    "pending": "⏳",
}
QUIET_USAGE = "Usage: /quiet 22:00-07:00 (reminders wait until it ends) · /quiet off · /quiet"


class JobButton(CallbackData, prefix="rem"):
    action: Literal["cancel", "pause", "resume"]
    job_id: int


def _buttons(found: list[ScheduledJob]) -> InlineKeyboardMarkup | None:
    rows = []
    for job in found:
        toggle: Literal["pause", "resume"] = "resume" if job.status == "paused" else "pause"
        label = f"▶ Resume #{job.id}" if toggle == "resume" else f"⏸ Pause #{job.id}"
        cancel = InlineKeyboardButton(
            text=f"✖ Cancel #{job.id}",
            callback_data=JobButton(action="cancel", job_id=job.id).pack(),
        )
        if job.status == "done":  # came due, waits for delivery: only cancelling is left
            rows.append([cancel])
            continue
        toggle_data = JobButton(action=toggle, job_id=job.id).pack()
        rows.append([InlineKeyboardButton(text=label, callback_data=toggle_data), cancel])
    return InlineKeyboardMarkup(inline_keyboard=rows) if rows else None


async def upcoming_text(app: App, user_id: int, tz: ZoneInfo) -> tuple[str, list[ScheduledJob]]:
    now = app.deps.clock()
    found = await jobs.listing(app.session_factory, user_id)
    if not found:
        return (
            "No reminders or tasks. Ask me, e.g. “remind me tomorrow at 9 to call Anna” or "
            "“every weekday at 8 send me the weather”.",
            [],
        )
    lines = [f"Your reminders and tasks (times in {tz.key}):"]
    lines += [jobs.job_line(j, now) for j in found[:30]]
    if len(found) > 30:
        lines.append(f"… and {len(found) - 30} more")
    return "\n".join(lines), found[:30]


async def history_text(app: App, user_id: int, tz: ZoneInfo) -> str:
    now = app.deps.clock()
    async with app.session_factory() as s:
        runs = await repo.history(s, user_id, HISTORY)
    if not runs:
        return "No reminder has run yet."
    out = [f"Last {len(runs)} runs (times in {tz.key}):"]
    for r in runs:
        text = r.text if len(r.text) <= 60 else r.text[:59] + "…"
        line = f"{STATUS_MARK.get(r.status, '?')} #{r.job_id} {local_text(r.due_at, tz, now)} "
        line += f"{r.status} · {text}"
        if r.error and r.status != "sent":
            line += f" — {r.error[:120]}"
        out.append(line)
    return "\n".join(out)


def _quiet_text(quiet: repo.Quiet | None) -> str:
    if quiet is None:
        return "No quiet hours. " + QUIET_USAGE
    return (
        f"Quiet hours: {quiet.start}-{quiet.end} in your time zone. Reminders due then "
        "arrive when they end; scheduled tasks still run on time. /quiet off removes them."
    )


async def quiet_command(app: App, user_id: int, arg: str, now: datetime) -> str:
    arg = arg.strip().lower()
    async with app.session_factory() as s, s.begin():
        if not arg:
            return _quiet_text(await repo.get_quiet(s, user_id))
        if arg in ("off", "none", "no"):
            await repo.set_quiet(s, user_id, None)
            return "Quiet hours off: reminders arrive on time, day and night."
        m = re.fullmatch(r"(\d{1,2}:\d{2})\s*[-–]\s*(\d{1,2}:\d{2})", arg)
        try:
            start, end = (parse_hhmm(m.group(1)), parse_hhmm(m.group(2))) if m else (None, None)
        except ValueError:
            start = end = None
        if start is None or end is None or start == end:
            return QUIET_USAGE
        quiet = repo.Quiet(f"{start:%H:%M}", f"{end:%H:%M}")
        await repo.set_quiet(s, user_id, quiet)
        return _quiet_text(quiet)


def build_router() -> Router:
    router = use_user(Router(name="reminders"))

    @router.message(
        Command("reminders"),
        flags={"command": ("reminders", "your reminders and tasks; /reminders history")},
    )
    async def on_reminders(
        message: Message, command: CommandObject, bot: Bot, app: App, user: ChatUser
    ) -> None:
        if (command.args or "").strip().lower() == "history":
            await send_plain(bot, message.chat.id, await history_text(app, user.id, user.tz))
            return
        text, shown = await upcoming_text(app, user.id, user.tz)
        await send_chunk(bot, message.chat.id, text, [], _buttons(shown))

    @router.message(
        Command("quiet"),
        flags={"command": ("quiet", "HH:MM-HH:MM: hold reminders back during those hours")},
    )
    async def on_quiet(
        message: Message, command: CommandObject, bot: Bot, app: App, user: ChatUser
    ) -> None:
        text = await quiet_command(app, user.id, command.args or "", app.deps.clock())
        await send_plain(bot, message.chat.id, text)

    @router.callback_query(JobButton.filter())
    async def on_button(
        query: CallbackQuery, callback_data: JobButton, bot: Bot, app: App, user: ChatUser
    ) -> None:
        try:
            job = await jobs.change(
                app.session_factory,
                user_id=user.id,
                job_id=callback_data.job_id,
                action=callback_data.action,
                now=app.deps.clock(),
            )
        except ToolError:
            await query.answer(f"There is no reminder #{callback_data.job_id}.", show_alert=True)
            return
        done = {"cancel": "Cancelled", "pause": "Paused", "resume": "Resumed"}
        await query.answer(f"{done[callback_data.action]} #{job.id}.")
        if query.message is not None:
            text, shown = await upcoming_text(app, user.id, user.tz)
            await bot.edit_message_text(
                text,
                chat_id=query.message.chat.id,
                message_id=query.message.message_id,
                reply_markup=_buttons(shown),
            )

    return router
