"""The Operator (bot/ops/operator.py) of a running app, through the functions `sidekick
doctor` and `sidekick backup` call."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path

from bot.app import App
from bot.ops.backup import archives, make_backup, verify
from bot.ops.doctor import check_all
from bot.ops.operator import OPERATOR
from tools.base import CheckResult


@dataclass
class LiveOperator:
    app: App
    # One backup at a time: two presses within a second would name the same archive.
    _making: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def doctor(self) -> list[CheckResult]:
        return await check_all(self.app)

    async def backup(self) -> Path:
        def make() -> Path:  # the database copy and the archive block: a thread of its own
            made = make_backup(self.app.settings)
            verify(made)
            return made

        async with self._making:
            return await asyncio.to_thread(make)

    def backups(self) -> list[Path]:
        return archives(self.app.settings)


def hand_operator(app: App) -> None:
    app.hand(OPERATOR, LiveOperator(app))
