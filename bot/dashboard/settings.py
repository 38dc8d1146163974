"""The dashboard's settings: off unless enabled, on loopback by default."""

from __future__ import annotations

from pydantic import BaseModel, Field, SecretStr


class DashboardSettings(BaseModel):
    dashboard_enabled: bool = False
    dashboard_host: str = "127.0.0.1"
    # 0: any free port (tests); the link /dashboard sends names the one it got.
    dashboard_port: int = Field(8765, ge=0, le=65535)
    # The address people open (a reverse proxy's https://...); unset: http://host:port.
    dashboard_url: str | None = None
    # The adapter's own token (the same variable): the Mini App's initData is signed with it.
    telegram_bot_token: SecretStr | None = None

    def base_url(self, port: int | None = None) -> str:
        if self.dashboard_url:
            return self.dashboard_url.rstrip("/")
        host = self.dashboard_host
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{port if port is not None else self.dashboard_port}"
