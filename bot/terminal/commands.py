"""The terminal chat's slash commands: the rows of the shared table (bot/commands.py) that
the terminal answers, with the same replies as Telegram's.

Each returns the text to print, or None when the line is not one of ours (it then goes to
the model, as in Telegram, where only known commands are intercepted).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from zoneinfo import ZoneInfo

from bot.app import App
from bot.commands import find, help_lines
from db.repos import core as core_repo
from tools import feature
from tools.feature import Command as FeatureCommand


@dataclass(frozen=True)
class Who:
    """The terminal user: a local user of their own, or (chat --as) a Telegram user."""

    telegram_user_id: int | None
    name: str


Handler = Callable[[App, Who, str], Awaitable[str]]


async def _user(app: App, who: Who) -> tuple[int, ZoneInfo]:
    """users.id and the user's time zone, as Telegram's routers get them (bot/telegram/user.py)."""
    async with app.session_factory() as s, s.begin():
        user = await core_repo.get_or_create_user(
            s, who.telegram_user_id, who.name, app.deps.clock()
        )
        return user.id, app.settings.session_policy.zone(user.timezone)


async def cmd_help(app: App, who: Who, arg: str) -> str:
    lines = [
        *help_lines(terminal=True, features=app.features),
        "/quit — leave (or Ctrl-D; Ctrl-C leaves at once)",
    ]
    return "Anything else you type goes to the assistant.\n\n" + "\n".join(lines)


# The terminal's answer to each row of bot/commands.py's APP_COMMANDS it answers
# (terminal=True); a feature's commands bring their own.
HANDLERS: dict[str, Handler] = {
    "start": cmd_help,
    "help": cmd_help,
}


def saved(folder: Path, name: str, content: bytes) -> str:
    """A file saved in `folder` under its own name; the line that says where."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / Path(name).name
    path.write_bytes(content)
    return f"\n(saved {path})"


def _printed(app: App, answer: feature.Answer) -> str:
    """An answer as the terminal shows it: its text (and the messages that follow it); a
    file is saved under DATA_DIR/files."""
    text = answer.text
    if answer.file is not None:
        text += saved(app.settings.data_dir / "files", *answer.file)
    return "\n\n".join([text, *(_printed(app, then) for then in answer.more)])


async def run_command(app: App, who: Who, line: str) -> str | None:
    """The reply to a slash command, or None when `line` is not one."""
    if not line.startswith("/"):
        return None
    word, _, arg = line[1:].partition(" ")
    command = find(word, app.features)
    if command is None:
        return None
    if not command.terminal:
        return f"/{command.name} is answered in Telegram only."
    if isinstance(command, FeatureCommand):
        user_id, tz = await _user(app, who)
        user = feature.Who(user_id, who.telegram_user_id, who.name, tz)
        answer = await command.run(feature.CommandCall(app, user, arg.strip()))
        return answer if isinstance(answer, str) else _printed(app, answer)
    return await HANDLERS[command.name](app, who, arg.strip())
