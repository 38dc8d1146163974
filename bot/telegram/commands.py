"""The aiogram filter for a row of the shared command table (bot/commands.py)."""

from __future__ import annotations

from aiogram.filters import Command

from bot.commands import names


def on_command(name: str) -> Command:
    """Matches the command's name and aliases in any case, as the terminal does."""
    return Command(*names(name), ignore_case=True)
