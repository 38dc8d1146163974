"""The slash commands, one table for both adapters' menus, /help and dispatch, so they cannot
drift apart. `APP_COMMANDS` rows are answered by each adapter's own handler
(tests/test_commands.py fails while one is missing); a feature's bring their handlers."""

from __future__ import annotations

from dataclasses import dataclass

from bot.features import FEATURES, feature_commands
from tools.feature import Command as FeatureCommand
from tools.feature import Feature


@dataclass(frozen=True)
class Command:
    name: str
    about: str
    aliases: tuple[str, ...] = ()
    # False: only Telegram answers it (its reply is built for Telegram: entities, buttons).
    terminal: bool = True
    args: str = ""

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name, *self.aliases)


APP_COMMANDS: tuple[Command, ...] = (
    Command("start", "say hello"),
    Command("help", "list the commands"),
)
APP_BY_NAME = {name: c for c in APP_COMMANDS for name in c.names}
AnyCommand = Command | FeatureCommand


def commands(features: tuple[Feature, ...] = FEATURES) -> tuple[AnyCommand, ...]:
    """Every command, in menu order: the app's own, then each listed feature's."""
    return (*APP_COMMANDS, *feature_commands(features))


def find(word: str, features: tuple[Feature, ...] = FEATURES) -> AnyCommand | None:
    """The command a word names (its name or an alias, any case), or None."""
    word = word.lower()
    return next((c for c in commands(features) if word in c.names), None)


def help_lines(*, terminal: bool, features: tuple[Feature, ...] = FEATURES) -> list[str]:
    """The /help list, the same in both adapters (the terminal says which it cannot answer)."""
    lines = []
    for c in commands(features):
        also = f" (also /{', /'.join(c.aliases)})" if c.aliases else ""
        where = " — in Telegram" if terminal and not c.terminal else ""
        # One layout for all: `/name args — what it does`.
        usage = f"/{c.name} {c.args}" if c.args else f"/{c.name}"
        lines.append(f"{usage} — {c.about}{also}{where}")
    return lines
