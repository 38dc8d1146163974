"""Replies to the commands both adapters answer (bot/commands.py), as plain text: Telegram's
routers send them, the terminal prints them. No aiogram here: the terminal does not load it."""

from __future__ import annotations

from bot.app import App
from db.repos import approvals as approvals_repo
from tools.discovery.report import tools_text
from tools.registry import discovery, mcp_manager

APPROVALS_USAGE = "Usage: /approvals · /approvals revoke <tool>"


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


async def approvals_command(app: App, user_id: int, telegram_id: int | None, args: str) -> str:
    """The user's "always" grants, or revoking one (`revoke <tool>`)."""
    verb, _, tool = args.strip().partition(" ")
    sf, mode = app.session_factory, app.settings.approvals
    if verb.lower() == "revoke" and tool.strip():
        gone = await approvals_repo.revoke(sf, user_id, telegram_id, tool.strip(), app.deps.clock())
        return f"Revoked: {gone} asks again." if gone else f"No grant for {tool.strip()!r}."
    if verb:
        return APPROVALS_USAGE
    grants = await approvals_repo.grants(sf, user_id)
    head = f"Approvals: {mode}" + (" (nothing asks)" if mode == "off" else "")
    if not grants:
        return f"{head}. You have allowed no tool for good.\n{APPROVALS_USAGE}"
    lines = [f"• {g.tool} (since {g.created_at:%Y-%m-%d})" for g in grants]
    return (
        f"{head}. Allowed for good, without asking:\n" + "\n".join(lines) + f"\n{APPROVALS_USAGE}"
    )
