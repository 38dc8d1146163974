"""/reminders (upcoming jobs with pause/resume/cancel buttons), /reminders history (the
run ledger) and /quiet HH:MM-HH:MM (quiet hours that hold reminders back)."""

from __future__ import annotations

from typing import Literal

from aiogram import Bot, Router
from aiogram.filters import CommandObject
from aiogram.filters.callback_data import CallbackData
from aiogram.types import CallbackQuery, InlineKeyboardButton, InlineKeyboardMarkup, Message

from bot.app import App
from bot.command_texts import history_text, quiet_command, upcoming_text
from bot.telegram.commands import on_command
from bot.telegram.render import send_chunk, send_plain
from bot.telegram.user import ChatUser, use_user
from db.models.schedule import ScheduledJob
from tools.base import ToolError
from tools.schedule import jobs


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


def build_router() -> Router:
    router = use_user(Router(name="reminders"))

    @router.message(on_command("reminders"), flags={"command": "reminders"})
    async def on_reminders(
        message: Message, command: CommandObject, bot: Bot, app: App, user: ChatUser
    ) -> None:
        if (command.args or "").strip().lower() == "history":
            await send_plain(bot, message.chat.id, await history_text(app, user.id, user.tz))
            return
        text, shown = await upcoming_text(app, user.id, user.tz)
        await send_chunk(bot, message.chat.id, text, [], _buttons(shown))

    @router.message(on_command("quiet"), flags={"command": "quiet"})
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
