"""The dashboard as the app's part (tools/feature.py Provide): the server's state, the chat's
menu (MenuApp) and the webhook's pages (WebPages). Apart from the server (server.py: aiohttp
and the pages), which the feature's builder imports only when DASHBOARD switches it on."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tools.feature import WebApp, WebPages
from tools.state import Key

if TYPE_CHECKING:
    from aiohttp import web

    from bot.dashboard.auth import Tokens
    from bot.dashboard.settings import DashboardSettings


@dataclass
class Dashboard:
    """The running server (or not: `state` says why), and where it listens."""

    settings: DashboardSettings
    tokens: Tokens
    state: str  # serving | off | failed: ...
    port: int | None = None
    runner: web.AppRunner | None = None
    site: WebPages | None = None  # served by the webhook's server (DASHBOARD=on in webhook mode)

    @property
    def url(self) -> str:
        return self.settings.base_url(self.port)

    @property
    def mini_app(self) -> str | None:
        """The Mini App's address when Telegram can open it: served, and over https (a
        Mini App must be; DASHBOARD_URL names the reverse proxy's address)."""
        if self.state != "serving" or not self.url.startswith("https://"):
            return None
        return f"{self.url}/miniapp"

    def routes(self) -> list[web.RouteDef]:
        """tools/feature.py WebPages: what the webhook's server serves of the dashboard."""
        return self.site.routes() if self.site is not None else []

    def menu(self) -> WebApp | None:
        """tools/feature.py MenuApp: the chat's menu opens the dashboard where it can."""
        url = self.mini_app
        return None if url is None else WebApp(MENU_LABEL, url)


DASHBOARD: Key[Dashboard] = Key("dashboard.server")
MENU_LABEL = "Dashboard"
