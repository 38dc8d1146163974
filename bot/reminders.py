"""Wiring reminders: the scheduler's ReminderJobs with this process's delivery and the agent.

The scheduler knows nothing of Telegram or the terminal: each adapter passes its own
`deliver`, and scheduled tasks run through the same Agent a message does.
"""

from __future__ import annotations

import sys
from typing import TextIO

from bot.agent.runner import Incoming
from bot.app import App
from db.repos.schedule import Recipient
from scheduler.reminders import Deliver, ReminderJobs, RunTask

TASK_PREFIX = (
    "[Scheduled task the user set up earlier; they are not waiting in the chat. Do it now "
    "and write the answer for them.]\n"
)


def task_runner(app: App) -> RunTask:
    async def run(recipient: Recipient, prompt: str) -> str:
        reply = await app.agent.handle(
            Incoming(
                TASK_PREFIX + prompt,
                telegram_user_id=recipient.telegram_id,
                user_name=recipient.name,
                chat_id=recipient.telegram_id,
                purpose="scheduled",  # metered and budgeted like chat, reported apart
            )
        )
        return reply.text

    return run


def build_reminders(app: App, deliver: Deliver, *, local: bool = False) -> ReminderJobs:
    return ReminderJobs(
        session_factory=app.session_factory,
        deliver=deliver,
        run_task=task_runner(app),
        clock=app.deps.clock,
        local=local,
    )


class TerminalDelivery:
    """`sidekick chat`: reminders of the local user printed into the chat; the id is a
    local counter (there is no Telegram message)."""

    def __init__(self, out: TextIO = sys.stdout) -> None:
        self.out = out
        self.sent = 0

    async def __call__(self, recipient: Recipient, text: str, markdown: bool) -> int:
        self.out.write(f"\n{text}\nyou> ")
        self.out.flush()
        self.sent += 1
        return self.sent
