"""The slash commands, one table for both adapters: Telegram's menu and /help, and the
terminal chat's /help and dispatch, all read it, so the two cannot drift apart.

Adding a command: a row here, then its handler in each adapter that answers it (a router
in bot/telegram/routers/ with `flags={"command": name}`, and bot/terminal_commands.py);
tests/test_commands.py fails while one of them is missing. Adapter-neutral reply texts
live in bot/command_texts.py and bot/session_texts.py.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Command:
    name: str
    about: str
    aliases: tuple[str, ...] = ()
    # False: only Telegram answers it (its reply is built for Telegram: entities, buttons).
    terminal: bool = True

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name, *self.aliases)


COMMANDS: tuple[Command, ...] = (
    Command("start", "say hello"),
    Command("help", "list the commands"),
    Command("newsession", "[name] end this conversation and start a new one", ("new",)),
    Command("sessions", "your recent sessions with their summaries"),
    Command("timezone", "[Area/City] show or set your time zone"),
    Command("memory", "what I remember about you: list, search, forget"),
    Command("tools", "the tools I can use and their token cost"),
    Command("context", "token split of your last request"),
    Command("usage", "tokens and cost: today, this month, by model"),
    Command("model", "show or switch your model"),
    Command("reminders", "your reminders and tasks; /reminders history"),
    Command("approvals", "tools you allowed for good; /approvals revoke <tool>"),
    Command("quiet", "HH:MM-HH:MM: hold reminders back during those hours"),
    Command("voice", "on|off|auto: answers as voice messages too", terminal=False),
    Command("codestats", "[days] your code runs: successes, failures, timing", terminal=False),
    Command("codefailures", "[n] your last failed code runs, with code and errors", terminal=False),
)
BY_NAME = {name: c for c in COMMANDS for name in c.names}


def find(word: str) -> Command | None:
    """The command a word names (its name or an alias, any case), or None."""
    return BY_NAME.get(word.lower())


def names(name: str) -> tuple[str, ...]:
    """A command's name and aliases: what a Telegram filter must match."""
    return BY_NAME[name].names


def help_lines(*, terminal: bool) -> list[str]:
    """The /help list, the same in both adapters (the terminal says which it cannot answer)."""
    lines = []
    for c in COMMANDS:
        also = f" (also /{', /'.join(c.aliases)})" if c.aliases else ""
        where = " — in Telegram" if terminal and not c.terminal else ""
        lines.append(f"/{c.name} — {c.about}{also}{where}")
    return lines
