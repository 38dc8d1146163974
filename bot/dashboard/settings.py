"""The dashboard's settings: off unless enabled, on loopback by default. One setting says
whether and where it listens (DASHBOARD=off | on | HOST:PORT), one where people open it."""

from __future__ import annotations

from pydantic import BaseModel, SecretStr, field_validator

DEFAULT_LISTEN = "127.0.0.1:8765"


class DashboardSettings(BaseModel):
    # off; on (127.0.0.1:8765); or the HOST:PORT it listens on (port 0: any free port, for
    # tests; the link /dashboard sends names the one it got).
    dashboard: str = "off"
    # The address people open (a reverse proxy's https://...); unset: http://host:port.
    dashboard_url: str | None = None
    # The adapter's own token (the same variable): the Mini App's initData is signed with it.
    telegram_bot_token: SecretStr | None = None

    @field_validator("dashboard")
    @classmethod
    def _listen(cls, value: str) -> str:
        value = value.strip().lower()
        if value in ("", "off", "false", "no", "0"):
            return "off"
        if value in ("on", "true", "yes", "1"):
            return DEFAULT_LISTEN
        host, _, port = value.rpartition(":")
        if not host or not port.isdigit() or int(port) > 65535:
            raise ValueError("DASHBOARD: off, on, or HOST:PORT to listen on (127.0.0.1:8765)")
        return f"{host.strip('[]')}:{int(port)}"

    @property
    def dashboard_enabled(self) -> bool:
        return self.dashboard != "off"

    @property
    def dashboard_host(self) -> str:
        return self.dashboard.rpartition(":")[0] if self.dashboard_enabled else "127.0.0.1"

    @property
    def dashboard_port(self) -> int:
        return int(self.dashboard.rpartition(":")[2]) if self.dashboard_enabled else 8765

    def base_url(self, port: int | None = None) -> str:
        if self.dashboard_url:
            return self.dashboard_url.rstrip("/")
        host = self.dashboard_host
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{port if port is not None else self.dashboard_port}"
