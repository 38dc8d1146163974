"""/dashboard: a one-time sign-in link (sent to the private chat), /dashboard off: sign out
everywhere."""

from __future__ import annotations

from bot.dashboard.auth import LINK_TTL
from bot.dashboard.server import DASHBOARD
from tools.feature import CommandCall

USAGE = "Usage: /dashboard (a sign-in link) · /dashboard off (sign out everywhere)"
OFF_WORDS = ("off", "logout", "signout")


async def dashboard(call: CommandCall) -> str:
    arg = call.args.strip().lower()
    if arg and arg not in OFF_WORDS:
        return USAGE
    try:
        board = call.host.part(DASHBOARD)
    except LookupError:
        return "The dashboard runs with the bot (`sidekick run`)."
    if arg:
        await board.tokens.sign_out_everywhere(call.who.user_id)
        return "Signed out of the dashboard everywhere; old links no longer work."
    if board.state == "off":
        return "The dashboard is off. The owner turns it on with DASHBOARD=on."
    if board.state != "serving":
        return f"The dashboard is not running ({board.state}); `sidekick doctor` says more."
    token = await board.tokens.link(call.who.user_id)
    minutes = int(LINK_TTL.total_seconds() // 60)
    return (
        f"Your dashboard sign-in link (works once, for {minutes} minutes):\n"
        f"{board.url}/login?t={token}\n\nSign out everywhere: /dashboard off"
    )
