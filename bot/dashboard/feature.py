"""Dashboard: a window beside the chat, in a browser or as a Telegram Mini App, served by the
bot's own process; /dashboard sends a one-time sign-in link, /dashboard off signs out
everywhere."""

from __future__ import annotations

from bot.dashboard.settings import DashboardSettings
from tools.feature import MENU, PAGES, Command, Feature, Host, Provide, Setup


def setup() -> Setup:
    from bot.dashboard import commands, probe
    from bot.dashboard.auth import Tokens
    from bot.dashboard.models import DashboardToken
    from bot.dashboard.part import DASHBOARD, Dashboard
    from tools.base import CheckResult

    async def start(host: Host) -> Dashboard:
        deps = host.deps
        settings = deps.settings_for(DashboardSettings)
        tokens = Tokens(deps.session_factory, deps.clock)
        if not settings.dashboard_enabled:
            return Dashboard(settings, tokens, "off")
        from bot.dashboard.server import serve  # aiohttp and the pages: only when switched on

        return await serve(host, settings, tokens)

    async def stop(dashboard: Dashboard) -> None:
        if dashboard.runner is not None:
            await dashboard.runner.cleanup()

    async def served(host: Host) -> Dashboard:
        """The server as the chat's menu (MenuApp) and the webhook's pages (WebPages) see it."""
        return await host.need(DASHBOARD)

    async def check(host: Host) -> list[CheckResult]:
        return await probe.check(host.deps.settings)

    return Setup(
        models=(DashboardToken,),
        commands=(
            Command(
                "dashboard",
                "a sign-in link to your dashboard",
                commands.dashboard,
                private=True,
                args="[off]",
            ),
        ),
        parts=(
            Provide(DASHBOARD, start, stop, on_start=True),
            Provide(MENU, served, on_start=True),
            Provide(PAGES, served, on_start=True),
        ),
        doctor=check,
    )


FEATURE = Feature(name="dashboard", settings=DashboardSettings, setup=setup)
