"""DASHBOARD=off | on | HOST:PORT (off by default, loopback when on): `on` in webhook mode
serves it from the webhook's own server, at WEBHOOK_URL's origin; DASHBOARD_URL is where
people open it."""

from __future__ import annotations

from urllib.parse import urlsplit

from pydantic import BaseModel, SecretStr, field_validator

DEFAULT_LISTEN = "127.0.0.1:8765"


class DashboardSettings(BaseModel):
    # off; on (127.0.0.1:8765, or the webhook's server); or the HOST:PORT it listens on
    # (port 0: any free port, for tests; the link /dashboard sends names the one it got).
    dashboard: str = "off"
    # The address people open (a reverse proxy's https://...); unset: http://host:port.
    dashboard_url: str | None = None
    # The adapter's own token (the same variable): the Mini App's initData is signed with it.
    telegram_bot_token: SecretStr | None = None
    webhook_url: str | None = None  # the adapter's (the same variable): webhook mode

    @field_validator("dashboard")
    @classmethod
    def _listen(cls, value: str) -> str:
        value = value.strip().lower()
        if value in ("", "off", "false", "no", "0"):
            return "off"
        if value in ("on", "true", "yes", "1"):
            return "on"
        host, _, port = value.rpartition(":")
        if not host or not port.isdigit() or int(port) > 65535:
            raise ValueError("DASHBOARD: off, on, or HOST:PORT to listen on (127.0.0.1:8765)")
        return f"{host.strip('[]')}:{int(port)}"

    @property
    def dashboard_enabled(self) -> bool:
        return self.dashboard != "off"

    @property
    def on_webhook(self) -> bool:
        """Served by the webhook's server (DASHBOARD=on in webhook mode)."""
        return self.dashboard == "on" and bool(self.webhook_url)

    @property
    def _address(self) -> str:
        return DEFAULT_LISTEN if self.dashboard in ("on", "off") else self.dashboard

    @property
    def dashboard_host(self) -> str:
        return self._address.rpartition(":")[0]

    @property
    def dashboard_port(self) -> int:
        return int(self._address.rpartition(":")[2])

    def base_url(self, port: int | None = None) -> str:
        if self.dashboard_url:
            return self.dashboard_url.rstrip("/")
        if self.on_webhook and self.webhook_url:
            parts = urlsplit(self.webhook_url)
            return f"{parts.scheme}://{parts.netloc}"
        host = self.dashboard_host
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{port if port is not None else self.dashboard_port}"
