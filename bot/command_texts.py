"""Replies to the commands both adapters answer (bot/commands.py), as plain text: Telegram's
routers send them, the terminal prints them. No aiogram here: the terminal does not load it."""

from __future__ import annotations

from bot.app import App
from tools.discovery.report import tools_text
from tools.registry import discovery, mcp_manager


def tools_command(app: App, user_id: int) -> str:
    disc = discovery(app.registry)
    text = (
        "Tools: " + ", ".join(app.registry.names())
        if disc is None
        else tools_text(disc, user_id, mcp_manager(app.registry))
    )
    off = app.registry.unusable
    if off:
        text += "\n\nNot offered (not configured):\n" + "\n".join(
            f"• {name}: {why}" for name, why in off.items()
        )
    return text
