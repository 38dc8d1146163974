"""/help in Telegram shows every command's placeholders as written (`<text>`, `[days]`),
through the assembled app on the fake Telegram; Markdown took `<text>` for HTML and dropped
it."""

from __future__ import annotations

from bot.commands import commands
from tests.e2e.conftest import OWNER, TG


async def test_help_shows_each_commands_placeholders(tg: TG) -> None:
    await tg.send(OWNER, "/help")
    shown = (await tg.reply(OWNER)).text
    assert "/memory [layer | search <text> | forget <id>] — " in shown
    assert "/approvals [revoke <tool>] — " in shown
    for c in commands(tg.app.features):
        usage = f"/{c.name} {c.args}" if c.args else f"/{c.name}"
        assert f"{usage} — {c.about}" in shown, usage
