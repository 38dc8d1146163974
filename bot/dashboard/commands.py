"""/dashboard: a one-time sign-in link (sent to the private chat), /dashboard off: sign out
everywhere."""

from __future__ import annotations

from bot.dashboard.auth import LINK_TTL
from bot.dashboard.part import DASHBOARD
from tools.feature import Answer, CommandCall, WebApp

USAGE = "Usage: /dashboard (a sign-in link) · /dashboard off (sign out everywhere)"
OFF_WORDS = ("off", "logout", "signout")


async def dashboard(call: CommandCall) -> Answer | str:
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
    link = (
        f"sign-in link (works once, for {minutes} minutes):\n{board.url}/login?t={token}\n\n"
        "Sign out everywhere: /dashboard off"
    )
    if board.mini_app is None or call.host.local:  # the terminal shows no button
        return f"Your dashboard {link}"
    # Inside Telegram the button opens it signed in; the link serves another browser.
    opens = WebApp("Open the dashboard", board.mini_app)
    text = f"Your dashboard: the button opens it here. In a browser, a {link}"
    return Answer(text, web_app=opens)
