"""The operator's doctor and backups as the running bot offers them to a feature (the
dashboard's owner pages), handed in by what runs the app (bot/ops/live.py): a feature cannot
import the doctor, which builds the app from the feature list."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from tools.base import CheckResult
from tools.state import Key


class Operator(Protocol):
    async def doctor(self) -> list[CheckResult]:
        """`sidekick doctor`'s checks, on the running app."""

    async def backup(self) -> Path:
        """A new archive, as `sidekick backup --verify` makes it (BackupError: why not)."""

    def backups(self) -> list[Path]:
        """The archives in DATA_DIR/backups, oldest first."""


OPERATOR: Key[Operator] = Key("ops.operator")
