"""One command table for both adapters: Telegram answers every row, the terminal every row
it claims, /help is the same list, and an alias answers like the name."""

from __future__ import annotations

from pathlib import Path

from bot.app import App
from bot.commands import APP_COMMANDS, commands, find, help_lines
from bot.terminal.commands import HANDLERS, Who, run_command

ME = Who(None, "ann")
COMMANDS = commands()


def test_the_terminal_answers_every_app_row_it_claims() -> None:
    # A feature's commands carry their own handler; the app's own rows need one here.
    assert set(HANDLERS) == {c.name for c in APP_COMMANDS if c.terminal}


def test_help_is_the_same_list_in_both_adapters() -> None:
    telegram = help_lines(terminal=False)
    terminal = help_lines(terminal=True)
    assert len(telegram) == len(terminal) == len(COMMANDS)
    for t, local in zip(telegram, terminal, strict=True):
        assert local.startswith(t)  # the terminal only adds "in Telegram" where it must
    assert any("/newsession" in line and "/new" in line.split("also")[-1] for line in telegram)


def test_aliases_and_case_find_the_command() -> None:
    assert find("new") is find("NewSession") is find("newsession")
    assert find("nosuch") is None


async def test_the_terminal_answers_telegram_commands(app: App, tmp_path: Path) -> None:
    help_text = await run_command(app, ME, "/help")
    assert help_text is not None
    for c in COMMANDS:
        assert f"/{c.name} " in help_text
    created = await run_command(app, ME, "/new errands")
    assert created is not None and "errands" in created
    assert (await run_command(app, ME, "/newsession")) is not None
    usage = await run_command(app, ME, "/usage")
    assert usage is not None and "today" in usage.lower()
    model = await run_command(app, ME, "/model")
    assert model is not None and "fake-model" in model
    reminders = await run_command(app, ME, "/reminders")
    assert reminders is not None and "No reminders" in reminders
    assert await run_command(app, ME, "/reminders history") == "No reminder has run yet."
    quiet = await run_command(app, ME, "/quiet 22:00-07:00")
    assert quiet is not None and "22:00-07:00" in quiet
    assert "22:00-07:00" in (await run_command(app, ME, "/quiet") or "")
    tools = await run_command(app, ME, "/tools")
    assert tools is not None and "Core, always shown" in tools
    context = await run_command(app, ME, "/context")
    assert context is not None and context.startswith(("No request", "Context accounting"))
    stats = await run_command(app, ME, "/codestats")
    assert stats is not None and "No runs yet" in stats
    assert await run_command(app, ME, "/voice on") == "/voice is answered in Telegram only."
    assert await run_command(app, ME, "/nosuch thing") is None
    assert await run_command(app, ME, "plain text") is None


def test_help_shows_each_commands_arguments_after_its_name() -> None:
    """One layout: `/name args — what it does` (arguments were in the text, each its way)."""
    import re

    from bot.commands import commands, help_lines

    placeholder = re.compile(r"^(\[|<|[A-Z]{2}|\S+\|\S+)")
    for c in commands():
        assert not placeholder.match(c.about), f"/{c.name}: arguments belong in args: {c.about}"
    lines = help_lines(terminal=False)
    assert "/quiet HH:MM-HH:MM — hold reminders back during those hours" in lines
    assert "/timezone [Area/City] — show or set your time zone" in lines
    assert all(re.match(r"^/[a-z]+( [^—]+)? — [a-z]", line) for line in lines), lines
