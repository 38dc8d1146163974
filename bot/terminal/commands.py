"""The terminal chat's slash commands, with Telegram's replies; None for a line that is not
one of ours (it goes to the model, as in Telegram)."""

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
    # A local user of their own, or (chat --as) a Telegram user.
    telegram_user_id: int | None
    name: str


Handler = Callable[[App, Who, str], Awaitable[str]]


async def _user(app: App, who: Who) -> tuple[int, ZoneInfo]:
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
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / Path(name).name
    path.write_bytes(content)
    return f"\n(saved {path})"


def _printed(app: App, answer: feature.Answer) -> str:
    text = answer.text
    if answer.file is not None:
        text += saved(app.settings.data_dir / "files", *answer.file)
    return "\n\n".join([text, *(_printed(app, then) for then in answer.more)])


async def run_command(app: App, who: Who, line: str) -> str | None:
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
