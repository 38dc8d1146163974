"""Where the dashboard listens and whether it answers, for `sidekick doctor` and
`sidekick status` (both run beside the bot, so they knock on its port)."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress

from pydantic import BaseModel

from bot.dashboard.settings import DashboardSettings
from tools.base import CheckResult

KNOCK_S = 2.0


async def answers(host: str, port: int) -> bool:
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), KNOCK_S)
    except (OSError, TimeoutError):
        return False
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


async def state(s: DashboardSettings) -> str:
    if not s.dashboard_enabled:
        return "off (DASHBOARD=on turns it on)"
    if s.on_webhook:
        return f"{s.base_url()} (served by the webhook's server)"
    up = await answers(s.dashboard_host, s.dashboard_port)
    return f"{s.base_url()} ({'answering' if up else 'not answering: is the bot running?'})"


async def check(settings: BaseModel) -> list[CheckResult]:
    if not isinstance(settings, DashboardSettings):
        return []
    exposed = settings.dashboard_enabled and not _loopback(settings.dashboard_host)
    if exposed and not (settings.dashboard_url or "").startswith("https://"):
        fix = (
            "keep DASHBOARD=on (127.0.0.1) and reach it through an HTTPS reverse proxy or a "
            "private network (DASHBOARD_URL=https://...)"
        )
        plain = f"listens on {settings.dashboard_host} over plain HTTP"
        return [CheckResult("dashboard", False, plain, fix)]
    return [CheckResult("dashboard", True, await state(settings))]


async def status_line(settings: BaseModel) -> str:
    if not isinstance(settings, DashboardSettings):
        return "dashboard:   not listed"
    return f"dashboard:   {await state(settings)}"
